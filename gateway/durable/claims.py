"""One process at a time resumes a run: it holds the run's claim lock while it checks that the
run is stopped (`DurableRuns.resumable`), claims it (DBOS's `resume_workflow`) and its
execution records that it runs there (its `execution` event). A second resumer waits for the
lock, then finds the run running (or ended) and says so.

Without it, two `runs resume` of one run at the same moment could both find it stopped, both
claim it, and both run its tool call that was in flight: DBOS lets the last claimer go on,
and an earlier one learns it lost only at its next write, after that call.

The lock is the database's, and goes with its holder's process (nothing renewed, nothing
expires): on PostgreSQL a session-level advisory lock named after the run; on SQLite (one
machine) an exclusive `flock` on the file `<store>-claim` beside the store's (one for all its
runs), as SQLite's own write lock lasts one transaction and the claim spans several of DBOS's.
Its holder deletes that file as it lets go, so none stays beside the store.

Deleting a file others `flock` is the classic race: a waiter that opened it before the delete
gets the lock on a file no longer there, while a third opens a new one under the name and
locks that: both would hold the claim. So a lock counts only if, once taken, the name still
names the file locked (else the taker opens the name again), and only a holder deletes it,
before it lets go: whoever holds a file the name names is the only one who can change that.
"""

from __future__ import annotations

import fcntl
import logging
import os
from contextlib import suppress
from typing import Any

import anyio
import psycopg

from ..errors import UnknownRun
from ..store_config import store_option
from .lock import CONNECT_TIMEOUT
from .replicas import on_postgres
from .store_failures import store_failure

__all__ = ["CLAIM_WAIT", "Claim", "claim"]

_log = logging.getLogger(__name__)

CLAIM_WAIT = 30.0
"""How long a resume waits for another process's claim of the run to end."""
_TRY_EVERY = 0.05
"""How often a claim held elsewhere is tried again."""
_TRY_LOCK = "SELECT pg_try_advisory_lock(hashtextextended(%s, 0))"


class Claim:
    """A run's claim lock, held by this process until `release`."""

    def __init__(self, url: str, run_id: str) -> None:
        self._url, self._run_id = url, run_id
        self._connection: psycopg.Connection[Any] | None = None
        self._file: int | None = None
        self.held = False

    def try_take(self) -> bool:
        """Take the lock if it is free (blocking I/O: in a thread)."""
        if on_postgres(self._url):
            if self._connection is None:
                self._connection = psycopg.connect(
                    self._url, autocommit=True, connect_timeout=CONNECT_TIMEOUT
                )
            row = self._connection.execute(_TRY_LOCK, (f"agent-gateway-claim:{self._run_id}",))
            self.held = row.fetchone() == (True,)
            return self.held
        while True:
            if self._file is None:
                self._file = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            if _same_file(self._file, self._path):
                self.held = True
                return True
            # Its holder deleted it as it let go (see the module's docstring): the name's anew.
            file, self._file = self._file, None
            os.close(file)

    @property
    def _path(self) -> str:
        return f"{self._url.removeprefix('sqlite:///')}-claim"

    def _close(self) -> None:
        connection, file, self._connection, self._file = self._connection, self._file, None, None
        held, self.held = self.held, False
        if connection is not None:
            connection.close()  # the session's advisory lock goes with it
        if file is not None:
            if held:  # only a holder deletes it; a waiter's open file is not the name's, maybe
                with suppress(OSError):  # left in a directory it may not change: harmless
                    os.unlink(self._path)
            os.close(file)  # the flock goes with its last descriptor

    async def release(self) -> None:
        """Let the next resumer check the run (again: harmless)."""
        if self._connection is not None or self._file is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._close)


def _same_file(file: int, path: str) -> bool:
    """Whether `path` names the open `file` (not deleted, not another made since)."""
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    opened = os.fstat(file)
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


async def claim(url: str, run_id: str, *, wait: float = CLAIM_WAIT) -> Claim:
    """The claim lock of `run_id` in the store at `url`, once no other process holds it.

    Raises `UnknownRun` if another process held it for all of `wait` seconds, what
    `store_failure` makes if the store cannot be reached."""
    held = Claim(url, run_id)
    told = False
    try:
        with anyio.move_on_after(wait):
            while not await anyio.to_thread.run_sync(held.try_take):
                if not told:
                    told = True
                    _log.info(
                        "run %s is being resumed by another process: waiting for it to run there",
                        run_id,
                    )
                await anyio.sleep(_TRY_EVERY)
            return held
    except (psycopg.Error, OSError) as exc:
        await held.release()
        raise store_failure(url, exc) from None
    except BaseException:
        await held.release()
        raise
    await held.release()
    raise UnknownRun(
        f"run {run_id!r} is being resumed by another process, which did not take it up within "
        f"{wait:g} s: `agent-gateway runs show {run_id}{store_option(url)}` shows where it is"
    )
