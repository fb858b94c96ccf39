"""Turns kept in this process only: gone when it exits."""

from __future__ import annotations

import time
from collections.abc import Sequence

import anyio

from ..messages import ChatMessage
from .base import SessionInfo, StoredTurn, Summary

__all__ = ["InProcessStore"]


class InProcessStore:
    """A `SessionStore` in a dict: for tests, and for one-off runs that need no history later."""

    def __init__(self) -> None:
        self._turns: dict[str, list[StoredTurn]] = {}
        self._summaries: dict[str, Summary] = {}
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return "InProcessStore()"

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        async with self._lock:
            turns = self._turns.setdefault(session_id, [])
            if any(turn.key == key for turn in turns):
                return False
            turns.append(
                StoredTurn(
                    seq=len(turns) + 1,
                    key=key,
                    messages=list(messages),
                    tokens=list(tokens),
                    created_at=time.time(),
                )
            )
            return True

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        async with self._lock:
            found = [
                t
                for t in self._turns.get(session_id, ())
                if after < t.seq and (before is None or t.seq < before)
            ]
        return found[-last:] if last is not None else found

    async def summary(self, session_id: str) -> Summary | None:
        return self._summaries.get(session_id)

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        async with self._lock:
            known = self._summaries.get(session_id)
            if known is None or known.through < summary.through:
                self._summaries[session_id] = summary

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        async with self._lock:
            infos = [
                SessionInfo(
                    session_id=session_id,
                    turns=len(turns),
                    updated_at=turns[-1].created_at,
                    summarised_through=s.through if (s := self._summaries.get(session_id)) else 0,
                )
                for session_id, turns in self._turns.items()
                if turns
            ]
        infos.sort(key=lambda info: (-info.updated_at, info.session_id))
        return infos[:limit]

    async def delete(self, session_id: str) -> bool:
        async with self._lock:
            self._summaries.pop(session_id, None)
            return self._turns.pop(session_id, None) is not None

    async def prune(self, before: float) -> int:
        async with self._lock:
            old = [s for s, turns in self._turns.items() if turns and turns[-1].created_at < before]
            for session_id in old:
                del self._turns[session_id]
                self._summaries.pop(session_id, None)
        return len(old)

    async def aclose(self) -> None:
        return None
