"""Finished runs are kept `keep_days` (`[store] keep_days`), then deleted: once when a process
opens the store to run workflows, then every hour while it stays open (a server).

Runs not finished (in flight, stopped, waiting for a person) are never deleted.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from toolkits import in_background

if TYPE_CHECKING:
    from .runs import DurableRuns

__all__ = ["pruning"]

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
