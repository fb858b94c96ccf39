"""A SQLite run store locked by another process (a `sqlite3` shell holding a transaction, a
backup, another agent-gateway's write) while runs execute here.

SQLite waits for a lock itself (its busy timeout), then DBOS retries "database is locked" for
ever, each try waiting again: a run hung without a word of ours, DBOS's warnings came every
half minute, and a Ctrl-C waited for its threads. Here the store's engines wait
`BUSY_SECONDS` at most, and hand the failure to `LockWait.locked` (SQLAlchemy's
`handle_error`, in DBOS's thread), which:

- says once that the store is locked, naming the wait and who holds the lock where the
  system tells (`sqlite_holder`), else no one (DBOS's own records about it are dropped, or
  kept at DEBUG when that is on: `quiet`); while this process deletes old runs itself
  (`busy_here`: `retention`), that it does;
- looks every `PROBE_SECONDS` whether it can be written: then it says so, and DBOS retries;
- after its wait (`[store] unreachable_wait`, as for a PostgreSQL store gone away), or as the
  store closes (Ctrl-C), raises `StoreUnavailable`, which DBOS does not retry: the run stops,
  resumable from its last recorded step.

This process's own writes never meet each other's lock there: they take turns
(`sqlite_turns`), and those waiting for their turn stop with the one that has it.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Generator
from contextlib import closing, contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, ExceptionContext

from ..errors import StoreUnavailable
from ..store_config import redacted
from .sqlite_holder import write_lock_holder
from .sqlite_turns import WriteTurns

__all__ = ["BUSY_SECONDS", "PROBE_SECONDS", "LockWait", "quiet"]

_log = logging.getLogger(__name__)

BUSY_SECONDS = 2.0
"""How long SQLite itself waits for the lock before a statement fails (DBOS sets 30 s)."""
PROBE_SECONDS = 0.5
"""How often a locked store is looked at."""
_LOCKED = "database is locked"
_HELD = "its write lock was held"
_ANEW = 10.0
"""Seconds without finding the store locked after which a lock is a new one (waited for)."""
_BUSY_SET = "agent_gateway_busy_timeout"
"""Marks a connection whose busy timeout is ours (`connection_record.info`)."""


class LockWait:
    """What this process knows of its SQLite run store being locked by another process, and
    its own writes' turns. DBOS's threads share it: `since` is written under `_guard`."""

    def __init__(self, url: str, wait: float) -> None:
        self.url = url
        self.wait = wait
        """Seconds the runs here wait for the lock before they stop."""
        self.file = url.removeprefix("sqlite:///")
        self.since: float | None = None
        """When the store was first found locked this time (`time.monotonic`); None: it is not."""
        self.closing = threading.Event()
        """Set as the store closes: nothing waits for it any more."""
        self._guard = threading.Lock()
        self._seen = 0.0
        """When it was last found locked."""
        self._here: str | None = None
        """What this process is writing that may hold the lock itself (`busy_here`)."""
        self.turns = WriteTurns(self._patience)

    @property
    def held(self) -> bool:
        """Whether another process holds the store's lock, as far as is known: a write now
        would wait for it (an ending run does not try)."""
        return self.since is not None

    def bind(self, engine: Engine) -> None:
        """`engine`'s writes take their turn, then wait `BUSY_SECONDS` for the lock, then
        ask this."""
        event.listen(engine, "checkout", self._checked_out)
        self.turns.bind(engine)
        event.listen(engine, "handle_error", self._failed)

    @contextmanager
    def busy_here(self, doing: str) -> Generator[None]:
        """While the block writes (`doing`: what), this process may hold the lock itself: a
        lock found meanwhile is said to be met while it does, not blamed on another."""
        self._here = doing
        try:
            yield
        finally:
            self._here = None

    def close(self) -> None:
        """The store is closing: the waits end (their runs stop), and no more begin."""
        self.closing.set()

    def error(self) -> StoreUnavailable:
        # Not SQLite's words: DBOS retries any error that says them.
        return StoreUnavailable(
            f"cannot write to the run store {redacted(self.url)}: {_HELD} for {self.wait:g} s "
            f"by {self._holder()}: try again once it lets go"
        )

    def _holder(self) -> str:
        return write_lock_holder(self.file) or "another connection"

    def _patience(self, held: float) -> None:
        """A write waiting for its turn while the one that has it has held it `held`
        seconds: it stops with that one (which waits for another process's lock), or when
        the store closes, or when that one never lets go."""
        since = self.since
        if self.closing.is_set() or (since is not None and time.monotonic() - since > self.wait):
            raise self.error()
        if since is None and held > self.wait:
            raise StoreUnavailable(
                f"cannot write to the run store {redacted(self.url)}: {_HELD} for "
                f"{held:.0f} s by another write of this process, which did not end"
            )

    def locked(self) -> None:
        """A statement found the store locked (after `BUSY_SECONDS`): return once it can be
        written (DBOS retries then), or raise `error()` when the wait is over."""
        with self._guard:
            now = time.monotonic()
            # Not seen locked for a while (nothing wrote, or it was let go): a lock anew.
            if self.since is None or now - self._seen > _ANEW:
                self.since = now - BUSY_SECONDS
                here = self._here
                if here is not None:
                    _log.warning(
                        "the run store %s is locked while this process deletes %s ([store] "
                        "keep_days, a batch at a time): runs here wait for it, up to %g s",
                        redacted(self.url),
                        here,
                        self.wait,
                    )
                else:
                    _log.warning(
                        "the run store %s is locked by %s: runs here wait up to %g s for it "
                        "([store] unreachable_wait), then stop; a stopped run resumes from its "
                        "last recorded step (Ctrl-C stops it now)",
                        redacted(self.url),
                        self._holder(),
                        self.wait,
                    )
            since, self._seen = self.since, now
        while not self.closing.is_set() and time.monotonic() - since < self.wait:
            if _writable(self.file):
                if self._lifted():  # said once, by the first wait to see it
                    _log.warning(
                        "the run store %s can be written again after %.0f s: runs go on",
                        redacted(self.url),
                        time.monotonic() - since,
                    )
                return
            self._seen = time.monotonic()
            self.closing.wait(PROBE_SECONDS)
        raise self.error()

    def _lifted(self) -> bool:
        """The lock is gone: whether this is the first to see it (and says so)."""
        with self._guard:
            was, self.since = self.since, None
        return was is not None

    def _checked_out(self, connection: Any, record: Any, _proxy: Any) -> None:
        if record.info.get(_BUSY_SET) is None and isinstance(connection, sqlite3.Connection):
            connection.execute(f"PRAGMA busy_timeout = {int(BUSY_SECONDS * 1000)}")
            record.info[_BUSY_SET] = True

    def _failed(self, context: ExceptionContext) -> None:
        cause = context.original_exception
        if isinstance(cause, sqlite3.OperationalError) and str(cause) == _LOCKED:
            if self.closing.is_set():
                raise self.error()
            self.locked()


def _writable(file: str) -> bool:
    """Whether the SQLite file can be written now (its write lock taken and let go at once);
    any failure but the lock is for DBOS to meet."""
    try:
        with closing(sqlite3.connect(file, timeout=0, isolation_level=None)) as db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        return str(exc) != _LOCKED
    return True


def quiet(record: logging.LogRecord) -> bool:
    """Whether DBOS's log `record` is about the store being locked, which `LockWait` says
    itself (True: drop it); at DEBUG it is kept, as DEBUG."""
    said = record.getMessage()
    cause = record.exc_info[1] if record.exc_info else None
    if cause is not None:
        said = f"{said} {cause}"
    if _LOCKED not in said and _HELD not in said:
        return False
    if logging.getLogger().isEnabledFor(logging.DEBUG):
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return False
    return True
