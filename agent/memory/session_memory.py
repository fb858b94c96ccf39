"""`SessionMemory`: a `ChatMemory` over any `SessionStore`, with a window and summaries."""

from __future__ import annotations

import time
from collections.abc import Sequence

from ..errors import MemoryStoreError
from ..messages import ChatMessage, SystemMessage
from .base import History, SessionStore, Summary, session_key_error
from .window import count_tokens, estimate_tokens, for_history, select_window

__all__ = ["DEFAULT_TURNS", "SUMMARY_HEADING", "SessionMemory"]

DEFAULT_TURNS = 10
SUMMARY_HEADING = "Summary of the conversation so far:"


class SessionMemory:
    """Keeps every turn in `store`; `load` returns the newest that fit `turns` and
    `max_tokens` (see `agent.memory.window`).

    With `summarise`, the turns that fall out of the window are handed to the agent to
    summarise with its own model; the summary is stored and comes first in later histories
    (it counts against `max_tokens` too).
    """

    def __init__(
        self,
        store: SessionStore,
        *,
        turns: int | None = DEFAULT_TURNS,
        max_tokens: int | None = None,
        summarise: bool = False,
    ) -> None:
        if turns is not None and turns < 1:
            raise ValueError("turns must be at least 1 (or None for no limit)")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("max_tokens must be at least 1 (or None for no limit)")
        self.store = store
        self.turns = turns
        self.max_tokens = max_tokens
        self.summarise = summarise

    def __repr__(self) -> str:
        return (
            f"SessionMemory({self.store!r}, turns={self.turns}, max_tokens={self.max_tokens}, "
            f"summarise={self.summarise})"
        )

    async def load(self, session_id: str) -> History:
        _check(session_id)
        summary = await self.store.summary(session_id)
        after = summary.through if summary else 0
        # Without summaries, what falls out of the window is never read: fetch no more.
        last = None if self.summarise else self.turns
        turns = await self.store.turns(session_id, after=after, last=last)
        budget = self.max_tokens
        head: list[ChatMessage] = []
        if summary is not None:
            head = [SystemMessage(content=f"{SUMMARY_HEADING}\n{summary.text}")]
            if budget is not None:
                budget = max(0, budget - summary.tokens)
        window = select_window(turns, max_turns=self.turns, max_tokens=budget)
        dropped = window.dropped if self.summarise else []
        return History(
            messages=[*head, *for_history(window.messages)],
            to_summarise=for_history([m for turn in dropped for m in turn.messages]),
            previous_summary=summary.text if summary else None,
            through=dropped[-1].seq if dropped else 0,
            tokens=window.tokens + (summary.tokens if summary else 0),
        )

    async def save(self, session_id: str, key: str, turn: Sequence[ChatMessage]) -> None:
        _check(session_id)
        await self.store.append(session_id, key, turn, count_tokens(turn))

    async def save_summary(self, session_id: str, through: int, text: str) -> None:
        _check(session_id)
        tokens = estimate_tokens(SystemMessage(content=f"{SUMMARY_HEADING}\n{text}"))
        summary = Summary(through=through, text=text, tokens=tokens, created_at=time.time())
        await self.store.put_summary(session_id, summary)


def _check(session_id: str) -> None:
    problem = session_key_error(session_id)
    if problem is not None:
        raise MemoryStoreError(f"bad session id {session_id[:40]!r}: {problem}")
