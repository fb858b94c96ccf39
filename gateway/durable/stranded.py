"""Runs a serving process stopped for its PostgreSQL store's outage, taken up again by that
process once the store is back.

A run the outage stopped (`outage`: the store away for longer than `[store]
unreachable_wait`) could not record that it stopped, since the store was away: the store says
it goes on in its process, whose lock keeps every other replica off it, and `runs resume`
refuses a run whose process lives. A `run` process ends then, and its run shows `stopped`.
A serving process lives on, and owns the runs that went on in its background (begun for a
client, or taken over): it takes them up again as soon as the store answers and it holds its
lock again. Each goes on from its last recorded step, as a resumed run does (a call whose
record was lost runs again). One that another process took meanwhile (this one was away
longer: `lock`), or that was cancelled, is left to it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING

import anyio

from toolkits import in_background

from ..errors import UnknownRun
from .lock import HeldLock
from .outage import PROBE_SECONDS, Outage

if TYPE_CHECKING:
    from .runs import DurableRuns

__all__ = ["taking_up"]

_log = logging.getLogger(__name__)


@asynccontextmanager
async def taking_up(runs: DurableRuns, lock: HeldLock, outage: Outage) -> AsyncGenerator[None]:
    """While the block runs, the runs the outage stopped here go on here again once the store
    is back (looked at every `PROBE_SECONDS`), each followed to its end for the log."""

    async def watch() -> None:
        async with anyio.create_task_group() as going:
            while True:
                await anyio.sleep(PROBE_SECONDS)
                back = not outage.unreachable and not outage.gave_up
                if not runs.stranded or not back or lock.held_since is None:
                    continue
                for run_id in list(runs.stranded):
                    try:
                        taken = await runs.take_up(run_id)
                    except Exception as exc:  # the store went away again: at the next look
                        _log.debug("run %s is not taken up again yet: %s", run_id, exc)
                        continue
                    if taken:
                        going.start_soon(_finish, runs, run_id)

    async with in_background(watch, wait_started=False):
        yield


async def _finish(runs: DurableRuns, run_id: str) -> None:
    try:
        await runs.follow(run_id, pause=False)
    except UnknownRun:  # it ended before this task began: the store says how
        with suppress(Exception):
            _log.info("run %s (taken up again) is %s", run_id, (await runs.get(run_id)).status)
    except Exception as exc:
        _log.warning("run %s (taken up again) stopped: %s", run_id, exc)
    else:
        _log.info("run %s (taken up again) finished", run_id)
