"""This process's advisory lock on a PostgreSQL store: while it runs workflows it holds a
session-level lock named after its executor id, so the store's other processes see it alive
(`replicas`). PostgreSQL drops the lock with the connection, so a lost connection (the server
restarted, a network blip) would leave a live process looking dead for ever: the lock is
taken again as soon as the store is back.

The other processes lost their connections too when the server restarted, and each takes its
lock again within about `RETAKE_EVERY`; a replica therefore takes no run over until it has held
its own lock for `SETTLE` seconds (`settled`), or it would find the others' locks free then.
If another process took this one's lock first (it was away from the store longer), its runs
are being taken over: those executing here stop (`superseded`) and the lock is waited for.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import psycopg

from toolkits import in_background

__all__ = ["RETAKE_EVERY", "SETTLE", "HeldLock", "staying_alive", "try_lock"]

_log = logging.getLogger(__name__)

RETAKE_EVERY = 0.5
"""Seconds between tries to take the lock again once its connection is lost."""
SETTLE = 3.0
"""Seconds a lock taken again is held before its process takes any run over: the others take
theirs again meanwhile."""
CONNECT_TIMEOUT = 5
"""Seconds a try may take to connect (a vanished host; a stopped server refuses at once)."""
_LOCK = "SELECT pg_advisory_lock(hashtextextended(%s, 0))"
_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"


class HeldLock:
    """The lock `own` holds on the store at `url`, and since when."""

    def __init__(self, url: str, own: str, superseded: Callable[[], None]) -> None:
        self.url, self.own = url, own
        self._superseded = superseded
        self._connection: psycopg.Connection[Any] | None = None
        self.held_since: float | None = None
        """When it was last taken (`anyio.current_time`); None while it is lost."""
        self._first = True
        """Held since it was first taken: no other process lost its own meanwhile."""

    @property
    def settled(self) -> bool:
        """Whether the lock has been held for `SETTLE` seconds without a break (or since it
        was first taken): the other processes on the store hold theirs, if they live."""
        since = self.held_since
        return since is not None and (self._first or anyio.current_time() - since >= SETTLE)

    async def take(self) -> None:
        """Take the lock first: nobody else holds a fresh executor id's lock."""
        self._connection = await anyio.to_thread.run_sync(_hold, self.url, self.own)
        self.held_since = anyio.current_time()

    async def keep(self) -> None:
        """Take the lock again whenever its connection is lost, until cancelled."""
        while True:
            connection = self._connection
            assert connection is not None
            # An idle session hears nothing from the server but its end (a FATAL message,
            # then EOF): a readable socket means the connection is worth a look.
            await anyio.wait_readable(connection.fileno())
            if await anyio.to_thread.run_sync(_lives, connection):
                continue
            self.held_since, self._first = None, False
            _log.info("lost the store connection holding %s's lock: taking it again", self.own)
            self._connection = await self._retake()
            self.held_since = anyio.current_time()
            _log.info("%s holds its lock on the store again", self.own)

    async def release(self) -> None:
        connection, self._connection, self.held_since = self._connection, None, None
        if connection is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(connection.close)

    async def _retake(self) -> psycopg.Connection[Any]:
        told = False
        while True:
            await anyio.sleep(RETAKE_EVERY)
            try:
                connection = await anyio.to_thread.run_sync(try_lock, self.url, self.own)
            except psycopg.Error:
                continue  # the store is away still (`outage` says so)
            if connection is not None:
                return connection
            if not told:  # another process found the lock free: it takes the runs here over
                told = True
                _log.warning(
                    "another process took %s's runs over while it was away from the store: "
                    "they stop here and go on there",
                    self.own,
                )
                self._superseded()


@asynccontextmanager
async def staying_alive(
    url: str, own: str, *, superseded: Callable[[], None]
) -> AsyncGenerator[HeldLock]:
    """Hold `own`'s lock while the block runs, taking it again when its connection is lost;
    `superseded` is called when another process took it meanwhile."""
    lock = HeldLock(url, own, superseded)
    await lock.take()
    try:
        async with in_background(lock.keep, wait_started=False):
            yield lock
    finally:
        await lock.release()


def try_lock(url: str, owner: str) -> psycopg.Connection[Any] | None:
    """A connection holding `owner`'s lock if it was free (close it to release), else None."""
    connection = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    row = connection.execute(_TRY_LOCK, (owner,)).fetchone()
    if row is not None and row[0] is True:
        return connection
    connection.close()
    return None


def _hold(url: str, own: str) -> psycopg.Connection[Any]:
    connection = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
    connection.execute(_LOCK, (own,))
    return connection


def _lives(connection: psycopg.Connection[Any]) -> bool:
    try:
        connection.execute("SELECT 1")
    except psycopg.Error:
        connection.close()
        return False
    return True
