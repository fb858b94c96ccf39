"""What a run store holds, read (and deleted) without running anything.

`StoredRuns` lists the runs of a DBOS store, reads one's status, steps, checkpoint, result and
the approvals it asked and was given, and deletes runs. `runs.DurableRuns` adds what runs them:
it starts, resumes, follows and steers runs. A database error is one line naming the store
(`store_failures`), and a record in Python's pickle format is refused unread
(`record_format`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Collection, Generator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from dbos import DBOSClient
from pydantic import JsonValue
from sqlalchemy.exc import SQLAlchemyError

from ..approval import ApprovalRequest
from ..errors import PickledDecision, PickledRecord, UnknownRun
from ..run_state import RunResult, RunState, stored_result, stored_state
from ..store_config import redacted
from .approvals import APPROVALS_EVENT
from .changes import last_changes
from .decisions import stored_decisions
from .record_format import pickled, refusals, refusing_for
from .status import (
    EXECUTION_EVENT,
    STATE_EVENT,
    RunInfo,
    RunStep,
    asked_in,
    run_info,
    run_steps,
)
from .store_failures import store_failure
from .workflow import WORKFLOW

__all__ = ["StoredRuns", "some_of"]

_log = logging.getLogger(__name__)

_FINISHED = ("SUCCESS", "ERROR", "CANCELLED")
_ENDED_AS = {"succeeded": "SUCCESS", "failed": "ERROR", "cancelled": "CANCELLED"}
"""DBOS's status of a run that has ended, by ours (`status.run_info`)."""
_GOING = ("PENDING", "ENQUEUED", "DELAYED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
"""DBOS's statuses of a run that has not ended (ours: running, waiting_approval, stopped)."""


def some_of(run_ids: Sequence[str]) -> str:
    """The first few of `run_ids`, to name them in one line."""
    return ", ".join(run_ids[:5]) + (", ..." if len(run_ids) > 5 else "")


class StoredRuns:
    """The runs of one store, as it holds them."""

    def __init__(self, url: str, client: DBOSClient) -> None:
        self.url = url
        self._client = client

    @contextmanager
    def _reading(self, run_id: str | None = None) -> Generator[None]:
        """A database error as one line (`store_failure`): a file that is not a database, a
        server that went away; a record of `run_id` in the pickle format, refused, naming it."""
        try:
            if run_id is None:
                yield
            else:
                with refusing_for(run_id):
                    yield
        except SQLAlchemyError as exc:
            raise store_failure(self.url, exc) from None

    @contextmanager
    def _writing(self) -> Generator[None]:
        """A database error as one line (`store_failure`): the store locked, its disk full."""
        try:
            yield
        except SQLAlchemyError as exc:
            raise store_failure(self.url, exc, doing="write to") from None

    async def list(
        self,
        status: str | None = None,
        *,
        limit: int | None = None,
        unread: list[str] | None = None,
    ) -> list[RunInfo]:
        """The runs, newest first (the newest `limit` of them); `status` one of
        `status.STATUSES`, looked for by the store: a run that ended is found by DBOS's status
        alone, one that goes on by its events too (running, waiting or stopped), read for the
        runs not ended only. A run with a record in the pickle format is left out, and one
        warning names those (the others are listed: a store an older version wrote is seen
        without trusting it); or, given `unread`, their ids go there, for the caller to say
        what it did without them."""
        ended = _ENDED_AS.get(status) if status is not None else None
        going = status is not None and ended is None
        infos: list[RunInfo] = []
        left_out: list[str] = [] if unread is None else unread
        with self._reading():
            with refusals() as refused:
                found = await self._client.list_workflows_async(
                    name=WORKFLOW,
                    status=[ended] if ended is not None else list(_GOING) if going else None,
                    sort_desc=True,
                    # Which of the runs not ended are `status` is known once each is read.
                    limit=None if going else limit,
                    load_output=False,
                )
            going_on = [each.workflow_id for each in found if each.status in _GOING]
            changed = await anyio.to_thread.run_sync(last_changes, self.url, going_on)
            for each in found:
                if limit is not None and len(infos) >= limit:
                    break
                try:  # DBOS read a refused input on, unread: each run is read again by itself
                    info = await (
                        self.get(each.workflow_id)
                        if refused
                        else self._info_of(each, changed.get(each.workflow_id))
                    )
                except PickledRecord:
                    left_out.append(each.workflow_id)
                    continue
                if status is None or info.status == status:
                    infos.append(info)
        if left_out and unread is None:
            _log.warning(
                "%d run%s not listed (%s): %s",
                len(left_out),
                "s are" if len(left_out) > 1 else " is",
                some_of(left_out),
                str(pickled()).replace("a record of the run store is", "each is", 1),
            )
        return infos

    async def get(self, run_id: str) -> RunInfo:
        with self._reading(run_id):
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_output=False
            )
            if not found:
                raise UnknownRun(f"no stored run {run_id!r} in {redacted(self.url)}")
            changed = None
            if found[0].status in _GOING:
                changes = await anyio.to_thread.run_sync(last_changes, self.url, [run_id])
                changed = changes.get(run_id)
            return await self._info(found[0], changed)

    async def _info_of(self, status: Any, changed_ms: int | None) -> RunInfo:
        with refusing_for(status.workflow_id):
            return await self._info(status, changed_ms)

    async def _info(self, status: Any, changed_ms: int | None) -> RunInfo:
        """`status` of a run and what it says (`status.run_info`); `changed_ms`: when a run
        not ended last changed, which DBOS's status does not tell (`changes`)."""
        execution = waiting = None
        decided: Collection[str] = ()
        unread: PickledDecision | None = None
        if status.status in ("PENDING", "ENQUEUED"):
            execution = await self._client.get_event_async(
                status.workflow_id, EXECUTION_EVENT, timeout_seconds=0
            )
            waiting = await self._client.get_event_async(
                status.workflow_id, APPROVALS_EVENT, timeout_seconds=0
            )
            if isinstance(waiting, dict) and waiting:  # which of them are decided already
                try:
                    decided = await self.decisions(status.workflow_id)
                except PickledDecision as exc:  # its calls wait, and that is why
                    unread = exc
        elif status.status == "ERROR" and status.error is None:
            # Loaded with the output only, which a list leaves out (it may be large).
            [status] = await self._client.list_workflows_async(workflow_ids=[status.workflow_id])
        info = run_info(status, execution, waiting, decided, changed_ms=changed_ms)
        return info if unread is None else dataclasses.replace(info, error=str(unread))

    async def asked(self, run_id: str) -> list[ApprovalRequest]:
        """The calls its `approvals` event lists (`status.asked_in`), whatever its status."""
        with self._reading(run_id):
            return asked_in(await self._client.get_event_async(run_id, APPROVALS_EVENT, 0))

    async def decisions(self, run_id: str) -> dict[str, dict[str, JsonValue]]:
        """The decisions sent to the run on its calls, taken by it or not yet, by call."""
        return await anyio.to_thread.run_sync(stored_decisions, self.url, run_id)

    async def waiting(self, run_id: str) -> dict[str, ApprovalRequest]:
        """The run's calls waiting for a person's approval, by name."""
        info = await self.get(run_id)
        return {r.call: r for r in info.waiting}

    async def steps(self, run_id: str) -> list[RunStep]:
        await self.get(run_id)
        with self._reading(run_id):
            return run_steps(await self._client.list_workflow_steps_async(run_id))

    async def result(self, run_id: str) -> RunResult | None:
        """What the run returned, if it has succeeded."""
        with self._reading(run_id):
            found = await self._client.list_workflows_async(workflow_ids=[run_id], load_input=False)
        output = found[0].output if found and found[0].status == "SUCCESS" else None
        return stored_result(output, run_id) if isinstance(output, str) else None

    async def state(self, run_id: str) -> RunState | None:
        """The run's last checkpoint, else the state it started from."""
        with self._reading(run_id):
            saved = await self._client.get_event_async(run_id, STATE_EVENT, timeout_seconds=0)
            if isinstance(saved, str):
                return stored_state(saved, run_id)
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_output=False
            )
        inputs = found[0].input if found else None
        return stored_state(inputs["args"][0], run_id) if inputs else None

    async def forget_finished(self, keep_days: float) -> int:
        """Delete the runs that finished more than `keep_days` ago; how many."""
        before = datetime.now(UTC) - timedelta(days=keep_days)
        old = await self._client.list_workflows_async(
            name=WORKFLOW,
            status=list(_FINISHED),
            completed_before=before.isoformat(),
            load_input=False,
            load_output=False,
        )
        if old:
            await self._client.delete_workflows_async([w.workflow_id for w in old])
        return len(old)

    async def delete(self, run_ids: Sequence[str]) -> None:
        """Delete the runs `run_ids` from the store, with everything recorded of them."""
        if run_ids:
            with self._writing():
                await self._client.delete_workflows_async(list(run_ids))
