"""One turn of a session at a time, within a process.

Two turns on one session at once (a client that retries, a user who submits twice) would each
load the history as it was when it started, so each model would miss the other's turn, and
the stored conversation would read as answers that ignore the turns above them. A turn holds
its session from loading the history to saving its turn; another waits for it.

A lock lives only while a turn holds or waits for it, so the locks of a long-running server
do not grow with the sessions it has seen. A run inside a run that holds a session (an agent
called as a tool, naming the caller's session) goes on under its caller's hold. Processes do
not see each other's locks: turns on one session in two processes still overlap.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable, Iterable
from contextlib import asynccontextmanager
from contextvars import ContextVar

import anyio

__all__ = ["OnWait", "SessionLocks"]

OnWait = Callable[[str], Awaitable[None]]
"""Told the session id when a turn must wait for another turn of that session."""

_HELD: ContextVar[frozenset[tuple[Hashable, str]]] = ContextVar(
    "agent_memory_sessions_held", default=frozenset()
)
"""The keys the running task (and the tasks it started) hold."""


class _Entry:
    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.users = 0
        """Turns holding or waiting for the lock: at 0 the entry goes."""


class SessionLocks:
    """Locks by key (a store and a session id), made when wanted, dropped when unused."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Hashable, str], _Entry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    @asynccontextmanager
    async def holding(
        self,
        keys: Iterable[tuple[Hashable, str]],
        on_wait: OnWait | None = None,
    ) -> AsyncGenerator[None]:
        """Hold every `(store, session_id)` key for the block, taken in one order (two runs
        wanting the same sessions never wait for each other crosswise). `on_wait` hears of
        each session this must wait for."""
        held = _HELD.get()
        wanted = sorted({key for key in keys if key not in held}, key=repr)
        taken: list[tuple[Hashable, str]] = []
        try:
            for key in wanted:
                await self._acquire(key, on_wait)
                taken.append(key)
            token = _HELD.set(held | frozenset(wanted))
            try:
                yield
            finally:
                _HELD.reset(token)
        finally:
            for key in reversed(taken):
                self._release(key)

    async def _acquire(self, key: tuple[Hashable, str], on_wait: OnWait | None) -> None:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            if entry.lock.locked() and on_wait is not None:
                await on_wait(key[1])
            await entry.lock.acquire()
        except BaseException:  # cancelled while waiting: it holds nothing
            self._forget(key, entry)
            raise

    def _release(self, key: tuple[Hashable, str]) -> None:
        entry = self._entries[key]
        entry.lock.release()
        self._forget(key, entry)

    def _forget(self, key: tuple[Hashable, str], entry: _Entry) -> None:
        entry.users -= 1
        if not entry.users:
            del self._entries[key]
