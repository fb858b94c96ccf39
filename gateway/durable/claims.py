"""One process at a time resumes a run: it holds the run's claim lock while it checks that the
run is stopped (`DurableRuns.resumable`), claims it (DBOS's `resume_workflow`) and its
execution records that it runs there (its `execution` event). A second resumer waits for the
lock, then finds the run running (or ended) and says so.

Without it, two `runs resume` of one run at the same moment could both find it stopped, both
claim it, and both run its tool call that was in flight: DBOS lets the last claimer go on,
and an earlier one learns it lost only at its next write, after that call.

The lock is the database's, and goes with its holder's process (nothing renewed, nothing
expires): on PostgreSQL a session-level advisory lock named after the run; on SQLite (one
machine) an exclusive `flock` on a file beside the store's, as SQLite's own write lock lasts
one transaction and the claim spans several of DBOS's.
"""

from __future__ import annotations

import fcntl
import logging
import os
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
        if self._file is None:
            path = f"{self._url.removeprefix('sqlite:///')}-claim"
            self._file = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self.held = True
        return True

    def _close(self) -> None:
        connection, file, self._connection, self._file = self._connection, self._file, None, None
        self.held = False
        if connection is not None:
            connection.close()  # the session's advisory lock goes with it
        if file is not None:
            os.close(file)  # and the flock with its last descriptor

    async def release(self) -> None:
        """Let the next resumer check the run (again: harmless)."""
        if self._connection is not None or self._file is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._close)


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
