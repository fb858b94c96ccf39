"""`SessionMemory`: a `ChatMemory` over any `SessionStore`, with a window and summaries."""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Collection, Hashable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace

from ..errors import MemoryStoreError
from ..messages import ChatMessage, SystemMessage
from .base import History, SessionStore, StoredTurn, Summary, session_key_error, store_key
from .session_locks import OnWait, SessionLocks
from .summary import SUMMARY_INPUT_TOKENS
from .window import count_tokens, estimate_tokens, for_history, select_window

__all__ = ["DEFAULT_TURNS", "SUMMARY_HEADING", "SessionMemory"]

DEFAULT_TURNS = 10
SUMMARY_HEADING = "Summary of the conversation so far:"
READ_PAGE = 32
"""Turns read at a time, newest first, where no turn count bounds what is read."""

_LOCKS = SessionLocks()
"""The process's turns in progress, by store and session."""


class SessionMemory:
    """Keeps every turn in `store`; `load` returns the newest that fit `turns` and
    `max_tokens` (see `agent.memory.window`).

    With `summarise`, the turns that fall out of the window are handed to the agent to
    summarise with its own model; the summary is stored and comes first in later histories
    (it counts against `max_tokens` too). One summary reads at most `SUMMARY_INPUT_TOKENS` of
    them, the newest: a long past never summarised (summaries switched on late) is left out of
    it (`History.left_out`) rather than sent whole on every turn.
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

    async def load(self, session_id: str, *, without: str | None = None) -> History:
        _check(session_id)
        summary = await self.store.summary(session_id)
        after = summary.through if summary else 0
        budget = self.max_tokens
        head: list[ChatMessage] = []
        if summary is not None:
            head = [SystemMessage(content=f"{SUMMARY_HEADING}\n{summary.text}")]
            if budget is not None:
                budget = max(0, budget - summary.tokens)
        turns = await self._newest(session_id, after, budget)
        # A step made again after its turn was saved (a crash before the run was stored):
        # the model reads the history as it was before its question, not its own answer.
        turns = [turn for turn in turns if turn.key != without]
        window = select_window(turns, max_turns=self.turns, max_tokens=budget)
        history = History(
            messages=[*head, *for_history(window.messages)],
            previous_summary=summary.text if summary else None,
            tokens=window.tokens + (summary.tokens if summary else 0),
        )
        # The window's first turn; every turn after the summary and before it fell out.
        kept_from = turns[len(window.dropped)].seq if len(window.dropped) < len(turns) else 0
        if not kept_from:
            kept_from = turns[-1].seq + 1 if turns else after + 1
        if not self.summarise or kept_from - 1 <= after:
            return history
        chosen = await self._to_summarise(session_id, after, window.dropped, kept_from)
        return replace(
            history,
            to_summarise=for_history([m for turn in chosen for m in turn.messages]),
            through=kept_from - 1,
            left_out=range(after + 1, chosen[0].seq),
        )

    async def _newest(self, session_id: str, after: int, budget: int | None) -> list[StoredTurn]:
        """Enough of the newest turns after `after` to choose the window from: a long session
        is not read whole for the few turns the model sees."""
        if self.turns is not None:
            return await self.store.turns(session_id, after=after, last=self.turns)
        if budget is None:
            return await self.store.turns(session_id, after=after)  # no limit: all of them
        read: list[StoredTurn] = []
        while True:  # a page at a time, newest first, until the token window ends
            before = read[0].seq if read else None
            page = await self.store.turns(session_id, after=after, before=before, last=READ_PAGE)
            read = page + read
            if len(page) < READ_PAGE:
                return read
            if select_window(read, max_turns=None, max_tokens=budget).dropped:
                return read

    async def _to_summarise(
        self, session_id: str, after: int, dropped: list[StoredTurn], kept_from: int
    ) -> list[StoredTurn]:
        """The newest turns of those between `after` and `kept_from` that one summary reads
        (`SUMMARY_INPUT_TOKENS`; at least one turn, which `summarise` cuts if it must)."""
        chosen: list[StoredTurn] = []
        used = 0
        candidates = list(dropped)
        oldest_read = dropped[0].seq if dropped else kept_from
        while True:
            while candidates:
                turn = candidates.pop()
                weight = sum(turn.tokens)
                if chosen and used + weight > SUMMARY_INPUT_TOKENS:
                    return chosen
                chosen.insert(0, turn)
                used += weight
            if oldest_read - 1 <= after:
                return chosen
            candidates = await self.store.turns(
                session_id, after=after, before=oldest_read, last=READ_PAGE
            )
            if not candidates:
                return chosen
            oldest_read = candidates[0].seq

    def hold(
        self, session_ids: Collection[str], on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold `session_ids` for one run's turns (see `agent.memory.session_locks`): the
        store is part of the key, so memories over one store share the sessions' locks,
        also over two store objects of one server's data (`SharedStore`)."""
        return self._holding(session_ids, on_wait)

    @asynccontextmanager
    async def _holding(
        self, session_ids: Collection[str], on_wait: OnWait | None
    ) -> AsyncGenerator[None]:
        store = await _lock_key(self.store)
        async with _LOCKS.holding([(store, s) for s in session_ids], on_wait):
            yield

    async def save(self, session_id: str, key: str, turn: Sequence[ChatMessage]) -> None:
        _check(session_id)
        await self.store.append(session_id, key, turn, count_tokens(turn))

    async def save_summary(self, session_id: str, through: int, text: str) -> None:
        _check(session_id)
        tokens = estimate_tokens(SystemMessage(content=f"{SUMMARY_HEADING}\n{text}"))
        summary = Summary(through=through, text=text, tokens=tokens, created_at=time.time())
        await self.store.put_summary(session_id, summary)


async def _lock_key(store: SessionStore) -> Hashable:
    """The store's part of a session lock's key (`store_key`). A server that does not say
    holds nothing up: the turn's own read of its history says what is wrong."""
    try:
        return await store_key(store)
    except MemoryStoreError:
        return id(store)


def _check(session_id: str) -> None:
    problem = session_key_error(session_id)
    if problem is not None:
        raise MemoryStoreError(f"bad session id {session_id[:40]!r}: {problem}")
