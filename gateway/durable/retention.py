"""Finished runs are kept `keep_days` (`[store] keep_days`, 30 by default), then deleted: by
a process that opens the store to run workflows, in its background, as soon as it opens it,
then every hour while it stays open (a server).

Nothing waits for it: the runs go on meanwhile, and it deletes a batch at a time
(`StoredRuns.forget_finished`), each its own transaction, so that a run waits one batch at
most for a SQLite store's lock. A backlog (months of runs, on a store no process opened
since, or with `keep_days` lowered) goes over the next commands: each deletes what it can
while it runs, and at least its first batch, which it waits for as it ends. Done at once,
80,000 runs kept the first `run` 36 s, and more than 65,535 failed on PostgreSQL.

Runs not finished (in flight, stopped, waiting for a person) are never deleted by it: a
stopped run may still be resumed. `forget_stopped` deletes those an operator gave up on
(`runs prune --stopped`), and `vacuumed` gives the room deleted runs left in a SQLite file
back to its disk.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from toolkits import in_background

from .changes import BATCH
from .record_format import pickled
from .store_failures import store_failure
from .stored import some_of

if TYPE_CHECKING:
    from .runs import DurableRuns

__all__ = ["forget_stopped", "pruning", "vacuumed"]

_log = logging.getLogger(__name__)

EVERY_SECONDS = 3600.0
VACUUM_WAIT = 30.0
"""Seconds `vacuumed` waits for a SQLite store's write lock (as DBOS does for a write)."""


@asynccontextmanager
async def pruning(
    runs: DurableRuns, keep_days: float, *, every: float = EVERY_SECONDS
) -> AsyncGenerator[None]:
    """While the block runs, delete the runs that finished more than `keep_days` ago, in the
    background: at once, then every `every` seconds. The block waits for none of it; its
    end waits for the first batch (if it has not ended), however short the block was."""
    first = anyio.Event()

    async def prune() -> None:
        try:
            await _prune(runs, keep_days, first)
        finally:
            first.set()
        while True:
            await anyio.sleep(every)
            await _prune(runs, keep_days)

    async with in_background(prune, wait_started=False):
        yield
        await first.wait()


async def _prune(runs: DurableRuns, keep_days: float, first: anyio.Event | None = None) -> None:
    """Delete the runs that finished more than `keep_days` ago, a batch at a time (`first`
    is set after the first); a failure is one warning, and the next round goes on."""
    deleted = 0
    try:
        while True:
            with runs.deleting(f"the runs that finished more than {keep_days:g} days ago"):
                batch = await runs.forget_finished(keep_days, batches=1)
            deleted += batch
            if first is not None:
                first.set()
            if batch < BATCH:
                break
    except Exception as exc:  # the store is away for a moment: the next round deletes them
        # One line: never a driver's statement, with every run id in it.
        said = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        _log.warning("deleting the runs older than %s days failed: %s", keep_days, said)
    finally:
        if deleted:
            plural = "" if deleted == 1 else "s"
            _log.info("deleted %d finished run%s older than %s days", deleted, plural, keep_days)


async def forget_stopped(runs: DurableRuns, older_than_days: float) -> tuple[int, list[str]]:
    """Delete the runs stopped (failed, interrupted, their process gone: resumable) that have
    not changed for `older_than_days`: how many, and the runs not ended that were skipped,
    stopped or not, as they are stored in the pickle format and not read (`record_format`)."""
    before_ms = (time.time() - older_than_days * 86400) * 1000
    skipped: list[str] = []
    old = [
        info.run_id
        for info in await runs.list("stopped", unread=skipped)
        if (info.updated_ms or info.created_ms or 0) < before_ms
    ]
    await runs.delete(old)
    if skipped:
        many = len(skipped) > 1
        _log.warning(
            "%d run%s not ended (%s) %s skipped, not pruned, stopped or not: %s",
            len(skipped),
            "s" if many else "",
            some_of(skipped),
            "were" if many else "was",
            str(pickled()).replace("a record of the run store is", "each is" if many else "it is"),
        )
    return len(old), skipped


async def vacuumed(url: str) -> tuple[int, int] | None:
    """Give the room that deleted runs left in a SQLite store's file back to its disk
    (`VACUUM`: SQLite reuses free pages, but never gives them back by itself): the file's
    size before and after; None for PostgreSQL, which reuses the room itself. It rewrites
    the file, and writers wait meanwhile. Raises `StoreUnavailable` (one line) if the file
    cannot be written now: its disk full, locked by another process."""
    if not url.startswith("sqlite:///"):
        return None
    return await anyio.to_thread.run_sync(_vacuum, url)


def _vacuum(url: str) -> tuple[int, int]:
    file = Path(url.removeprefix("sqlite:///"))
    try:
        before = file.stat().st_size
        with closing(sqlite3.connect(file, timeout=VACUUM_WAIT, isolation_level=None)) as db:
            if db.execute("PRAGMA freelist_count").fetchone()[0]:  # else nothing to give
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file shrinks only then
        return before, file.stat().st_size
    except (sqlite3.Error, OSError) as exc:
        raise store_failure(url, exc, doing="write to") from None
