"""How a run executing here ends besides its answer: cancelled from any process, taken by
another process that resumed it at the same moment, or failed in every item.

Of two processes that claim one run, DBOS runs it in the one that claimed it last: the other's
execution, if it began, learns at its next write (`lost_to_another`) and stops, its driver
told the run is `taken`. Two resumes, or a resume and a `take_over`, do not get there
(`claims`), unless one claims it without looking first (a `take_over` with no `still`).

DBOS's `cancel_workflow` only marks a run: the process running it notices at its next step,
and a wait for approval (`recv`) has none. `cancels_watched` looks the running runs up every
`WATCH_SECONDS` (one query for all) and cancels the scope of each one cancelled.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import Protocol, cast

import anyio
from dbos import DBOSClient
from dbos._error import DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError

from toolkits import in_background

from ..errors import UnknownRun
from ..run_state import RunResult
from ..store_config import store_option

__all__ = [
    "WATCH_SECONDS",
    "ItemsFailed",
    "Watched",
    "cancelled_by_dbos",
    "cancels_watched",
    "failed_items",
    "lost_to_another",
    "taken",
]

_log = logging.getLogger(__name__)

WATCH_SECONDS = 0.5
"""How often the runs executing here are looked up for a cancel, and a run being resumed
here for another process that resumed it at the same moment."""


class ItemsFailed(Exception):
    """Every item of a run failed on its own (max iterations, a request the model refused):
    the run ended, and failed. Its result is its driver's."""


class Watched(Protocol):
    """A run's execution here, as the cancel watch sees it."""

    running: bool
    cancelled: bool
    scope: anyio.CancelScope


def failed_items(result: RunResult | None) -> str | None:
    """The error of a run whose every item failed (the first item's), else None."""
    if result is None or not result.items or any(i.error is None for i in result.items):
        return None
    return result.items[0].error


def cancelled_by_dbos(exc: BaseException) -> bool:
    """Whether `exc` is DBOS's word that the run was cancelled (alone, or among others)."""
    if isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        return group.subgroup(DBOSWorkflowCancelledError) is not None
    return isinstance(exc, DBOSWorkflowCancelledError)


def lost_to_another(exc: BaseException) -> bool:
    """Whether `exc` is DBOS's word that this execution no longer owns the run (alone, or
    among others): a resume elsewhere claimed it after this one did, or a cancel took it.
    DBOS lets the latest claim run it; an older execution learns so at its next write."""
    if isinstance(exc, BaseExceptionGroup):
        group = cast(BaseExceptionGroup[BaseException], exc)
        return group.subgroup(DBOSWorkflowConflictIDError) is not None
    return isinstance(exc, DBOSWorkflowConflictIDError)


def taken(run_id: str, url: str) -> UnknownRun:
    """A run of the store at `url` that another process resumed first."""
    return UnknownRun(
        f"run {run_id!r} was resumed by another process at the same moment: it runs there "
        f"(`agent-gateway runs show {run_id}{store_option(url)}`)"
    )


def cancels_watched(
    executions: Mapping[str, Watched], client: DBOSClient
) -> AbstractAsyncContextManager[object]:
    """While the block runs, stop the runs of `executions` that were cancelled."""

    async def watch() -> None:
        while True:
            await anyio.sleep(WATCH_SECONDS)
            going = [run_id for run_id, e in executions.items() if e.running]
            if not going:
                continue
            try:
                found = await client.list_workflows_async(
                    workflow_ids=going, status=["CANCELLED"], load_input=False, load_output=False
                )
            except Exception as exc:  # the store is down: the runs learn it at their next step
                _log.debug("cannot look for cancelled runs: %s", exc)
                continue
            for status in found:
                execution = executions.get(status.workflow_id)
                if execution is not None:
                    execution.cancelled = True
                    execution.scope.cancel()

    return in_background(watch, wait_started=False)
