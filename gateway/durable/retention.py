"""Finished runs are kept `keep_days` (`[store] keep_days`), then deleted: once when a process
opens the store to run workflows, then every hour while it stays open (a server).

Runs not finished (in flight, stopped, waiting for a person) are never deleted by it: a
stopped run may still be resumed. `forget_stopped` deletes those an operator gave up on
(`runs prune --stopped`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from toolkits import in_background

from .record_format import pickled
from .stored import some_of

if TYPE_CHECKING:
    from .runs import DurableRuns

__all__ = ["forget_stopped", "pruning"]

_log = logging.getLogger(__name__)

EVERY_SECONDS = 3600.0


@asynccontextmanager
async def pruning(
    runs: DurableRuns, keep_days: float, *, every: float = EVERY_SECONDS
) -> AsyncGenerator[None]:
    """While the block runs, delete the runs that finished more than `keep_days` ago: at
    once (before the block), then every `every` seconds."""
    await _prune(runs, keep_days)

    async def hourly() -> None:
        while True:
            await anyio.sleep(every)
            await _prune(runs, keep_days)

    async with in_background(hourly, wait_started=False):
        yield


async def _prune(runs: DurableRuns, keep_days: float) -> None:
    try:
        deleted = await runs.forget_finished(keep_days)
    except Exception as exc:  # the store is away for a moment: the next round deletes them
        _log.warning("deleting the runs older than %s days failed: %s", keep_days, exc)
        return
    if deleted:
        _log.info("deleted %d finished runs older than %s days", deleted, keep_days)


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
