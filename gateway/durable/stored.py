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
from functools import partial
from typing import Any

import anyio
from dbos import DBOSClient
from dbos._serialization import deserialize_value
from pydantic import JsonValue
from sqlalchemy.exc import SQLAlchemyError

from ..approval import ApprovalRequest
from ..errors import PickledDecision, PickledRecord, StoreError, UnknownRun
from ..run_state import RunResult, RunState, stored_result, stored_state
from ..store_config import redacted
from .approvals import APPROVAL_TOPIC, APPROVALS_EVENT
from .changes import BATCH, GoingRecords, going_records, last_changes
from .checkpoints import state_of
from .decisions import decisions_in, stored_decisions
from .record_format import STORED_FORMAT, pickled, refusals, refusing_for
from .so_far import recorded_calls, recorded_so_far
from .status import (
    EXECUTION_EVENT,
    RESULT_EVENT,
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
        alone, one that goes on by its events too (running, waiting or stopped), read a page
        of runs not ended at a time until `limit` are found. A run with a record in the
        pickle format is left out, and one warning names those (the others are listed: a
        store an older version wrote is seen without trusting it); or, given `unread`, their
        ids go there, for the caller to say what it did without them."""
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
                    # Which of the runs not ended are `status` is known once their events
                    # are read; their inputs are read then, of those listed only.
                    limit=None if going else limit,
                    load_input=not going,
                    # Why each failed; a result (maybe large) is never listed.
                    load_output=ended == "ERROR",
                )
            for start in range(0, len(found), BATCH):
                wanted = None if limit is None else limit - len(infos)
                if wanted is not None and wanted <= 0:
                    break
                page = found[start : start + BATCH]
                if refused:  # DBOS read a refused input on, unread: each run is read again
                    infos += await self._each(page, status, wanted, left_out)
                else:
                    infos += await self._page(page, status, wanted, left_out, inputs=not going)
        if left_out and unread is None:
            _log.warning(
                "%d run%s not listed (%s): %s",
                len(left_out),
                "s are" if len(left_out) > 1 else " is",
                some_of(left_out),
                str(pickled()).replace("a record of the run store is", "each is", 1),
            )
        return infos

    async def _page(
        self,
        page: Sequence[Any],
        status: str | None,
        wanted: int | None,
        left_out: list[str],
        *,
        inputs: bool,
    ) -> list[RunInfo]:
        """Of `page` (DBOS's statuses, newest first), the first `wanted` runs that are
        `status` (None: any), read for all at once (`_records`); a run with a record in the
        pickle format goes to `left_out`. Listed without their `inputs` (runs not ended,
        whose status is known only then), the runs found have theirs read after, and when
        each last changed: only they."""
        records, failed = await self._records(page, inputs=inputs)
        infos: list[RunInfo] = []
        found: list[Any] = []
        for each in page:
            try:
                info = self._info(failed.get(each.workflow_id, each), records)
            except PickledRecord:
                left_out.append(each.workflow_id)
                continue
            if status is None or info.status == status:
                infos.append(info)
                found.append(each)
        if inputs:
            return infos[:wanted]
        infos = []
        while found and (wanted is None or len(infos) < wanted):
            take = BATCH if wanted is None else wanted - len(infos)
            some = [each.workflow_id for each in found[:take]]
            found = found[len(some) :]
            with refusals() as refused:
                listed = await self._client.list_workflows_async(
                    workflow_ids=some, load_output=False
                )
            # In the page's order (runs begun within the same second are in no other).
            by_id = {each.workflow_id: each for each in listed}
            listed = [by_id[run_id] for run_id in some if run_id in by_id]
            if refused:  # DBOS read a refused input on, unread
                infos += await self._each(listed, status, None, left_out)
                continue
            records.changed.update(await anyio.to_thread.run_sync(last_changes, self.url, some))
            for each in listed:
                info = self._info(each, records)
                if info.status == status:  # else it moved on meanwhile
                    infos.append(info)
        return infos

    async def _each(
        self, page: Sequence[Any], status: str | None, wanted: int | None, left_out: list[str]
    ) -> list[RunInfo]:
        """`_page`, each run read by itself: to know which has a record in the pickle
        format, where DBOS's listing met one (and read it on, unread)."""
        infos: list[RunInfo] = []
        for each in page:
            if wanted is not None and len(infos) >= wanted:
                break
            try:
                info = await self.get(each.workflow_id)
            except PickledRecord:
                left_out.append(each.workflow_id)
                continue
            if status is None or info.status == status:
                infos.append(info)
        return infos

    async def get(self, run_id: str) -> RunInfo:
        with self._reading(run_id):
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_output=False
            )
            if not found:
                raise UnknownRun(f"no stored run {run_id!r} in {redacted(self.url)}")
            records, failed = await self._records(found, inputs=True)
            return self._info(failed.get(run_id, found[0]), records)

    async def _records(
        self, page: Sequence[Any], *, inputs: bool
    ) -> tuple[GoingRecords, dict[str, Any]]:
        """What the runs of `page` (DBOS's statuses) say beyond their status, read for all
        at once: the events and messages of those not ended, with their `inputs` when each
        last changed too (one connection); and those that failed again, with why (a status
        listed without its output has no error)."""
        going = [each.workflow_id for each in page if each.status in _GOING]
        records = (
            await anyio.to_thread.run_sync(
                partial(
                    going_records,
                    self.url,
                    going,
                    events=(EXECUTION_EVENT, APPROVALS_EVENT),
                    topic=APPROVAL_TOPIC,
                    changes=inputs,
                )
            )
            if going
            else GoingRecords()
        )
        failed = [e.workflow_id for e in page if e.status == "ERROR" and e.error is None]
        reread: dict[str, Any] = {}
        for start in range(0, len(failed), BATCH):
            for each in await self._client.list_workflows_async(
                workflow_ids=failed[start : start + BATCH], load_input=inputs
            ):
                reread[each.workflow_id] = each
        return records, reread

    def _info(self, status: Any, records: GoingRecords) -> RunInfo:
        """`status` of a run and what it says (`status.run_info`), with what `records` hold
        of it: its events, the decisions sent to it (`decisions_in`), when it last changed
        (which DBOS's status does not tell: `changes`). Raises `PickledRecord` naming the run
        if a record of it is in the pickle format."""
        run_id = status.workflow_id
        execution = waiting = None
        decided: Collection[str] = ()
        unread: PickledDecision | None = None
        with refusing_for(run_id):
            if status.status in ("PENDING", "ENQUEUED"):
                execution = _event(records, run_id, EXECUTION_EVENT)
                waiting = _event(records, run_id, APPROVALS_EVENT)
                if isinstance(waiting, dict) and waiting:  # which of them are decided already
                    try:
                        decided = decisions_in(records.messages.get(run_id, ()), run_id)
                    except PickledDecision as exc:  # its calls wait, and that is why
                        unread = exc
        changed = records.changed.get(run_id)
        info = run_info(status, execution, waiting, decided, changed_ms=changed)
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
        """What the run returned, if it has succeeded, or failed in every item."""
        with self._reading(run_id):
            found = await self._client.list_workflows_async(workflow_ids=[run_id], load_input=False)
            status = found[0].status if found else None
            output = found[0].output if status == "SUCCESS" else None
            if status == "ERROR":
                output = await self._client.get_event_async(run_id, RESULT_EVENT, timeout_seconds=0)
        return stored_result(output, run_id) if isinstance(output, str) else None

    async def state(self, run_id: str) -> RunState | None:
        """The run's last checkpoint, else the state it started from."""
        with self._reading(run_id):
            saved = await self._client.get_event_async(run_id, STATE_EVENT, timeout_seconds=0)
            steps = await self._client.list_workflow_steps_async(run_id)
            state = state_of(run_id, saved, steps)
            if state is not None:
                return state
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_output=False
            )
        inputs = found[0].input if found else None
        return stored_state(inputs["args"][0], run_id) if inputs else None

    async def so_far(self, run_id: str) -> RunState | None:
        """What the run did so far: its last checkpoint with the calls of its step in progress
        recorded since (`so_far`), as `runs show` shows it; None if it is not stored."""
        state = await self.state(run_id)
        if state is None:
            return None
        return recorded_so_far(state, recorded_calls(await self.steps(run_id)))

    async def forget_finished(self, keep_days: float, *, batches: int | None = None) -> int:
        """Delete the runs that finished more than `keep_days` ago, oldest first, `BATCH` at a
        time (at most `batches` of them), each its own transaction: what is deleted stays so
        if a later one fails, a full disk gets room as it goes, and a SQLite store's write
        lock is let go between them. How many were deleted. Raises `StoreError` (one line) if
        the store cannot be read or written, saying how many were deleted before."""
        before = (datetime.now(UTC) - timedelta(days=keep_days)).isoformat()
        since: str | None = None
        deleted = done = 0
        while batches is None or done < batches:
            try:
                with self._writing():
                    old = await self._client.list_workflows_async(
                        name=WORKFLOW,
                        status=list(_FINISHED),
                        completed_before=before,
                        # From the last batch's on: PostgreSQL would step over every row
                        # deleted before (dead until vacuumed) to find the next ones.
                        start_time=since,
                        limit=BATCH,
                        load_input=False,
                        load_output=False,
                    )
                    if old:
                        await self._client.delete_workflows_async([w.workflow_id for w in old])
            except StoreError as exc:
                raise _after(exc, deleted) from None
            deleted, done = deleted + len(old), done + 1
            if len(old) < BATCH:
                break
            last = old[-1].created_at
            since = datetime.fromtimestamp(last / 1000, UTC).isoformat() if last else None
        return deleted

    async def delete(self, run_ids: Sequence[str]) -> None:
        """Delete the runs `run_ids` from the store, with everything recorded of them,
        `BATCH` at a time (see `forget_finished`). Raises `StoreError` (one line) if the
        store cannot be written, saying how many were deleted before."""
        for start in range(0, len(run_ids), BATCH):
            try:
                with self._writing():
                    batch = list(run_ids[start : start + BATCH])
                    await self._client.delete_workflows_async(batch)
            except StoreError as exc:
                raise _after(exc, start) from None


def _after(exc: StoreError, deleted: int) -> StoreError:
    """`exc`, saying that `deleted` runs were deleted before it (they stay so)."""
    if not deleted:
        return exc
    return type(exc)(f"{exc} ({deleted} run{'s were' if deleted > 1 else ' was'} deleted first)")


def _event(records: GoingRecords, run_id: str, key: str) -> Any:
    """The run's event `key` as DBOS's `get_event` gives it, None if it has none; one in
    the pickle format is refused unread (`record_format`)."""
    stored = records.events.get((run_id, key))
    return None if stored is None else deserialize_value(stored[0], stored[1], STORED_FORMAT)
