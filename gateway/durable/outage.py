"""A PostgreSQL run store that becomes unreachable while runs execute here.

DBOS retries an operation that lost its database for ever (`db_retry`: a step's record
waits until the server is back), and its background threads log a warning at every poll: a
run hung, stderr filled, and nothing said why. Here, DBOS's retries ask an `Outage` whether to
go on (it stands in for the system database's `_retry_connection_errors`, read at each
retry), and DBOS's log records of failed connections mark the store suspect too (`suspect`).
`watching` then checks the database itself every `PROBE_SECONDS`:

- unreachable, it says so once (a warning naming the store and the wait); DBOS's own
  warnings about it are dropped meanwhile (logged at DEBUG when that is on);
- reachable again within the wait, it says so, and the runs go on: each of DBOS's retries
  waited for this look (`Outage.__bool__`), so it comes within about two seconds, not on DBOS's
  backoff, grown meanwhile (up to a minute), and after the line, not before it;
- still unreachable after the wait (`[store] unreachable_wait`), it gives up: the runs
  executing here stop with `StoreUnavailable`, resumable from their last recorded step, and
  DBOS's retries raise instead of waiting, until the store is back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import asynccontextmanager, contextmanager

import anyio

from agent.url_credentials import driver_said
from toolkits import in_background

from ..errors import StoreUnavailable
from ..store_config import redacted

__all__ = ["PROBE_SECONDS", "Outage", "noticing", "suspect", "watching"]

_log = logging.getLogger(__name__)

PROBE_SECONDS = 1.0
"""How often a suspect store is looked at."""
PROBE_TIMEOUT = 2
"""Seconds a look may take to connect (psycopg's least)."""


class Outage:
    """What this process knows of its PostgreSQL run store being unreachable. DBOS's threads
    and the event loop both use it: each field is written whole, and a race costs at most one
    look more; what DBOS's retries wait on (`__bool__`) is guarded by `_looked`."""

    def __init__(self, url: str, wait: float) -> None:
        self.url = url
        self.wait = wait
        """Seconds the runs here wait for the store before they stop."""
        self.suspected = False
        """Something failed to reach the store: look."""
        self.down_since: float | None = None
        """When a look first found it unreachable (`time.monotonic`); None: it is not."""
        self.gave_up = False
        """The wait is over: DBOS's retries raise, the runs here have stopped."""
        self.cause = ""
        self.watched_from: int | None = None
        """The thread of the event loop that looks (`watching`); None: nothing looks."""
        self._looked = threading.Condition()
        """Notified when a look found the store reachable, and when the wait is over."""
        self._looks = 0
        """Looks begun."""
        self._reachable_at = 0
        """The latest look that found the store reachable (its number in `_looks`)."""

    def __bool__(self) -> bool:
        """DBOS's question at each retry of an operation that could not reach the database:
        go on retrying? Yes, until the wait is over. While the store is watched, the answer
        waits for a look begun after the question: DBOS then sleeps its backoff, which grows
        at each retry (1 s doubling, to 60 s), so without the wait a store back in seconds
        might be retried only a minute later, and the runs could end before the look that
        says the store is back."""
        with self._looked:
            self.suspected = True  # under the lock: a look begun after `after` sees it
            after = self._looks
            if self.watched_from in (None, threading.get_ident()):
                return not self.gave_up  # not watched, or asked by the watcher's own loop
            self._looked.wait_for(lambda: self.gave_up or self._reachable_at > after)
            return not self.gave_up

    @property
    def unreachable(self) -> bool:
        """Whether a write now would wait for the store (so an ending run does not try)."""
        return self.suspected or self.down_since is not None

    def error(self) -> StoreUnavailable:
        waited = f"{self.wait:g} s"
        return StoreUnavailable(
            f"the run store {redacted(self.url)} was unreachable for {waited}: {self.cause}"
        )

    def bound(self, sys_db: object) -> None:
        """`sys_db` (a DBOS system database, DBOS's own or a client's) asks this outage
        whether to retry a lost connection, instead of retrying for ever."""
        # DBOS 3.4 reads it at each retry (`getattr(db, "_retry_connection_errors", True)`);
        # its public switch (DBOSClient's `retry_connection_errors`) is fixed at creation.
        setattr(sys_db, "_retry_connection_errors", self)  # noqa: B010

    def look_begins(self) -> int:
        """A look at the store begins: its number."""
        with self._looked:
            self.suspected = False
            self._looks += 1
            return self._looks

    def reachable(self, look: int) -> None:
        """Look number `look` reached the store: DBOS's retries go on."""
        with self._looked:
            self.down_since, self.gave_up = None, False
            self._reachable_at = look
            self._looked.notify_all()

    def give_up(self) -> None:
        """The wait is over: DBOS's retries raise, those waiting now too."""
        with self._looked:
            self.gave_up = True
            self._looked.notify_all()


_current: Outage | None = None
"""The outage watch of the store open in this process (DBOS has one per process)."""


def suspect(record: logging.LogRecord) -> bool:
    """Whether DBOS's log `record` says it could not reach the store; if so the store is
    suspect, and the record is DBOS's to keep to itself while the outage is being watched
    (True: drop it)."""
    outage = _current
    if outage is None or record.levelno >= logging.ERROR:
        return False
    said = record.getMessage()
    cause = record.exc_info[1] if record.exc_info else None
    if cause is not None:
        said = f"{said} {type(cause).__name__}: {cause}"
    if not any(word in said for word in _CONNECTION_WORDS):
        return False
    outage.suspected = True
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return False
    return True


_CONNECTION_WORDS = ("OperationalError", "onnection", "Database connection failed")
"""What DBOS's warnings of a lost database say (psycopg's `OperationalError`, `connection
failed`, `server closed the connection`, db_retry's own words)."""


@contextmanager
def noticing(outage: Outage | None) -> Generator[None]:
    """While the block runs, DBOS's log records of a lost store mark `outage` suspect (and are
    dropped: see `suspect`); until DBOS is destroyed, its threads may log."""
    global _current
    _current = outage
    try:
        yield
    finally:
        _current = None


@asynccontextmanager
async def watching(
    outage: Outage, give_up: Callable[[StoreUnavailable], None]
) -> AsyncGenerator[None]:
    """While the block runs, a suspect store is looked at; `give_up(error)` stops the runs
    here once the wait is over. After it, DBOS's retries raise (the store is being closed)."""

    async def watch() -> None:
        while True:
            await anyio.sleep(PROBE_SECONDS)
            if outage.suspected or outage.down_since is not None:
                await _look(outage, give_up)

    outage.watched_from = threading.get_ident()
    try:
        async with in_background(watch, wait_started=False):
            yield
    finally:
        outage.give_up()
        outage.watched_from = None


async def _look(outage: Outage, give_up: Callable[[StoreUnavailable], None]) -> None:
    look = outage.look_begins()
    cause = await anyio.to_thread.run_sync(_unreachable, outage.url, abandon_on_cancel=True)
    now = time.monotonic()
    if cause is None:
        if outage.down_since is not None:
            _log.warning(
                "the run store %s is reachable again after %.0f s: runs go on",
                redacted(outage.url),
                now - outage.down_since,
            )
        outage.reachable(look)  # after the line: DBOS's retries waited for it
        return
    outage.cause = cause
    if outage.down_since is None:
        outage.down_since = now
        _log.warning(
            "the run store %s is unreachable (%s): runs here wait up to %g s for it "
            "([store] unreachable_wait), then stop; a stopped run resumes from its last "
            "recorded step (Ctrl-C stops it now). DBOS's retries are logged at DEBUG",
            redacted(outage.url),
            cause,
            outage.wait,
        )
    if not outage.gave_up and now - outage.down_since >= outage.wait:
        outage.give_up()
        give_up(outage.error())


def _unreachable(url: str) -> str | None:
    """Why the database at `url` cannot be reached now, in one line; None if it can."""
    import psycopg  # here: PostgreSQL stores only

    try:
        with psycopg.connect(url, connect_timeout=PROBE_TIMEOUT) as connection:
            connection.execute("SELECT 1")
    except psycopg.Error as exc:
        return driver_said(url, exc)
    return None
