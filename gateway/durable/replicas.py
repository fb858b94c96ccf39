"""Processes on one PostgreSQL store: which are alive, and the runs of a replica that died
finished by another.

DBOS tags each workflow with its executor's id and leaves finding dead executors to whoever
runs them (its Conductor service, or an operator calling its recovery endpoint). Here the
database tells: while a process runs workflows on a PostgreSQL store it holds a session-level
advisory lock named after its executor id, and PostgreSQL drops the lock when the process's
connection goes (at once when it dies; when TCP keepalives give up when its machine vanishes).
Nothing is renewed and nothing expires: no lease of ours (`lock`).

- A run executing in a live process elsewhere is not taken from it (`alive`): a round or a
  decision that reaches another replica waits for the run through the store
  (`follow_elsewhere`), telling its client of each call recorded meanwhile.
- Every `interval` seconds a serving replica whose own lock is settled (`HeldLock.settled`:
  not taken again a moment ago) looks for runs in flight (pending, not stopped by their
  replica) of another replica whose lock it can take: that replica is dead. Holding the dead
  replica's lock meanwhile, so that no other replica does the same, it takes each such run
  over (DBOS's `resume_workflow` to a queue of its own) and runs it to its end; every call
  recorded before the death is answered from its record. It holds the run's claim lock as it
  does, as `runs resume` does (`claims`): of the two at once, one runs the run. A run its
  replica stopped on purpose (failed, interrupted, waiting for a person) stays for `runs
  resume`, a decision or a client.
  A run with a record in the pickle format is not taken over (`record_format`): it is said
  once, and left.
- A run is taken over on the taker's config. One that started on another config (its
  origin's `config_sha256`: a replica on an older or newer config, a roll-out half done) is
  left to a replica serving the same for `CONFIG_PATIENCE` intervals; then, none having taken
  it (a config rolled out everywhere), it is taken with a WARNING naming the run and both
  configs, as its agents and tools may differ (`runs resume` refuses such a config without
  `--force`; a run must not be stranded by a roll-out).
- The log says whether the replica died (a WARNING) or left, told to go, and handed its runs
  over (INFO: a rolling restart is no crash), as the run's execution event records it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Collection
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import anyio
import anyio.abc
from dbos import DBOSClient

from toolkits import in_background

from ..approval import ApprovalRequest
from ..errors import GatewayError, PickledRecord
from ..run_state import RunOrigin, RunResult, stored_result
from ..trace import TraceEvent, TraceHook, new_id
from .approvals import APPROVALS_EVENT
from .lock import HeldLock, try_lock
from .record_format import refusing_for
from .status import EXECUTION_EVENT, run_steps
from .tree import CallNode, recorded_call

if TYPE_CHECKING:
    from .runs import DurableRuns

__all__ = [
    "REPLICA_PREFIX",
    "alive",
    "follow_elsewhere",
    "owner_of",
    "taking_over",
]

_log = logging.getLogger(__name__)

REPLICA_PREFIX = "agent-gateway-replica-"
"""Executor ids (and queue names) of serving replicas: only their runs are taken over; a
`run` that stopped waits for `runs resume`."""
FOLLOW_POLL = 0.1
"""How often a run executing elsewhere is looked at."""
CONFIG_PATIENCE = 3
"""Takeover intervals a run that started on another config than this replica's is left to a
replica serving the same before this one takes it."""


def on_postgres(url: str) -> bool:
    return url.startswith(("postgresql:", "postgres:"))


@asynccontextmanager
async def taking_over(
    runs: DurableRuns,
    client: DBOSClient,
    lock: HeldLock,
    *,
    workflow: str,
    interval: float,
    origin: RunOrigin | None = None,
) -> AsyncGenerator[None]:
    """While the block runs, take over the runs of replicas that died, every `interval` s;
    `lock` is this process's own, `origin` says the config it serves (None: unknown)."""
    async with in_background(
        partial(_watch, runs, client, lock, workflow, interval, origin), wait_started=False
    ):
        yield


async def alive(url: str, executor: str) -> bool:
    """Whether the process `executor` holds its lock (it lives)."""
    lock = await anyio.to_thread.run_sync(try_lock, url, executor)
    if lock is None:
        return True
    await anyio.to_thread.run_sync(lock.close)
    return False


def owner_of(status: Any) -> str | None:
    """The process a pending run is with: the one running it, or the one it is queued to."""
    owner = status.queue_name if status.status == "ENQUEUED" else status.executor_id
    return owner if isinstance(owner, str) and owner.startswith("agent-gateway-") else None


async def follow_elsewhere(
    client: DBOSClient,
    run_id: str,
    *,
    decided: Collection[str] = (),
    pause: bool = True,
    follower: TraceHook | None = None,
) -> RunResult | list[ApprovalRequest]:
    """Wait, through the store, for a run executing in another process to end (its result),
    or with `pause`, to wait for a decision on a call not in `decided` (the calls waiting).
    `follower` hears of each model and tool call recorded from now on, as it is recorded
    (an `end` event, or `error`): the run's progress, seen from here.
    Raises `GatewayError` when it stops or fails."""
    teller = _Teller(run_id, follower, decided) if follower is not None else None
    while True:
        with refusing_for(run_id):
            found = await client.list_workflows_async(workflow_ids=[run_id], load_input=False)
        if not found:
            raise GatewayError(f"run {run_id!r} is not in the store any more")
        status = found[0]
        if teller is not None:  # after the status: every call of a run seen ended is told
            with refusing_for(run_id):
                await teller.tell(client)
        if status.status == "SUCCESS" and isinstance(status.output, str):
            return stored_result(status.output, run_id)
        if status.status == "ERROR":  # every item failed (`ItemsFailed`), or DBOS could not run it
            raise GatewayError(f"run {run_id!r} failed: {status.error}")
        if status.status not in ("PENDING", "ENQUEUED"):
            raise GatewayError(f"run {run_id!r} ended: {status.status.lower()}")
        with refusing_for(run_id):
            execution = await client.get_event_async(run_id, EXECUTION_EVENT, timeout_seconds=0)
            waiting = await client.get_event_async(run_id, APPROVALS_EVENT, timeout_seconds=0)
        stopped = (
            cast(dict[str, Any], execution).get("stopped") if isinstance(execution, dict) else None
        )
        if stopped is not None:
            raise GatewayError(f"run {run_id!r} stopped: {stopped}; it is stored, resumable")
        if pause and isinstance(waiting, dict) and waiting:
            calls = cast(dict[str, Any], waiting)
            if not any(call in calls for call in decided):
                return [ApprovalRequest.model_validate(r) for r in calls.values()]
        await anyio.sleep(FOLLOW_POLL)


class _Teller:
    """Tells a follower of the run's calls recorded from now on: after the run received
    the decisions `decided` (its calls ran once it had them), else since it began to follow
    (by the clocks of the two processes)."""

    def __init__(self, run_id: str, follower: TraceHook, decided: Collection[str]) -> None:
        self._run_id = run_id
        self._follower = follower
        self._decided = set(decided)
        self._since_ms = time.time() * 1000
        self._after_step: int | None = None if decided else -1
        self._told: set[int] = set()

    async def tell(self, client: DBOSClient) -> None:
        steps = run_steps(await client.list_workflow_steps_async(self._run_id))
        if self._after_step is None:
            received = [s.step_id for s in steps if self._decision(s.name, s.output)]
            if not received:
                return  # the decisions have not reached the run yet
            self._after_step = max(received)
        for step in steps:
            if step.step_id <= self._after_step or step.step_id in self._told:
                continue
            early = not self._decided and (step.completed_ms or 0) < self._since_ms
            if step.completed_ms is None or early:
                continue
            self._told.add(step.step_id)
            call = recorded_call(step)
            if call is not None:
                await self._follower(self._event(call))

    def _decision(self, name: str, output: Any) -> bool:
        return (
            name == "DBOS.recv"
            and isinstance(output, dict)
            and cast(dict[str, Any], output).get("call") in self._decided
        )

    def _event(self, call: CallNode) -> TraceEvent:
        return TraceEvent(
            kind=call.kind,
            phase="error" if call.error else "end",
            # A tool by its name; the model is named where its process knows it.
            name=call.name if call.kind == "tool" else "on another replica",
            id=new_id(),
            parent_id=None,
            run_id=self._run_id,
            at_ms=0.0,
            duration_ms=call.took_ms,
            input=call.input,
            output=call.output,
            error=call.error,
            call_id=call.call_id,
        )


async def _watch(
    runs: DurableRuns,
    client: DBOSClient,
    lock: HeldLock,
    workflow: str,
    interval: float,
    origin: RunOrigin | None,
) -> None:
    refused: set[str] = set()
    """Runs with a record in the pickle format, said once and left."""
    strangers: dict[str, float] = {}
    """Runs that started on another config, and when each was first seen in flight."""
    async with anyio.create_task_group() as taken:  # the runs taken over, followed to the end
        while True:
            await anyio.sleep(interval)
            if not lock.settled:
                # Ours was lost a moment ago (the server restarted?): so were the others', and
                # they may be taking theirs again right now.
                continue
            try:
                in_flight = await _in_flight(client, lock.own, workflow, refused)
                going = {run_id for run_ids in in_flight.values() for run_id in run_ids}
                for run_id in set(strangers) - going:
                    del strangers[run_id]
                configs = _Configs(origin, strangers, CONFIG_PATIENCE * interval)
                for owner, run_ids in in_flight.items():
                    await _take_over(
                        runs, client, lock.url, owner, run_ids, taken, refused, configs
                    )
            except Exception as exc:  # the store is away for a moment: look again later
                _log.warning("looking for the runs of replicas that died failed: %s", exc)


def _replicas(status: Any) -> str | None:
    owner = owner_of(status)
    return owner if owner is not None and owner.startswith(REPLICA_PREFIX) else None


async def _in_flight(
    client: DBOSClient, own: str, workflow: str, refused: set[str]
) -> dict[str, list[str]]:
    """Runs in flight on other replicas, by replica (not those `refused`)."""
    found = await client.list_workflows_async(
        name=workflow, status=["PENDING", "ENQUEUED"], load_input=False, load_output=False
    )
    by_owner: dict[str, list[str]] = {}
    for status in found:
        owner = _replicas(status)
        if owner is None or owner == own or status.workflow_id in refused:
            continue
        try:
            if status.status == "PENDING" and not await _running(client, status.workflow_id):
                continue
        except PickledRecord as exc:
            _refuse(status.workflow_id, exc, refused)
            continue
        by_owner.setdefault(owner, []).append(status.workflow_id)
    return by_owner


async def _execution(client: DBOSClient, run_id: str) -> dict[str, Any] | None:
    """The run's execution event: where it runs, and whether it was stopped or left."""
    with refusing_for(run_id):
        execution = await client.get_event_async(run_id, EXECUTION_EVENT, timeout_seconds=0)
    return cast(dict[str, Any], execution) if isinstance(execution, dict) else None


async def _running(client: DBOSClient, run_id: str) -> bool:
    """Whether the run's replica was running it (rather than stopped it on purpose)."""
    execution = await _execution(client, run_id)
    return execution is not None and execution.get("stopped") is None


class _Configs:
    """This replica's config, and which runs that started on another it may take now."""

    def __init__(
        self, ours: RunOrigin | None, first_seen: dict[str, float], patience: float
    ) -> None:
        self._ours = ours
        self._first_seen = first_seen
        self._patience = patience

    async def differs(self, runs: DurableRuns, run_id: str) -> str | None:
        """How the config the run started on differs from this replica's; None: the same,
        or either unknown (a run stored before runs had an origin)."""
        ours = self._ours
        if ours is None:
            return None
        state = await runs.state(run_id)
        theirs = state.origin if state is not None else None
        if theirs is None or theirs.config_sha256 == ours.config_sha256:
            return None
        return (
            f"it started on config {_config(theirs.config, theirs.config_sha256)}, "
            f"this replica serves {_config(ours.config, ours.config_sha256)}"
        )

    def waited(self, run_id: str) -> bool:
        """Whether the run has been left long enough to a replica on its config."""
        now = anyio.current_time()
        return now - self._first_seen.setdefault(run_id, now) >= self._patience


def _config(path: str | None, digest: str | None) -> str:
    return "the built-in default" if path is None else f"{path} (sha256 {(digest or '?')[:12]})"


async def _take_over(
    runs: DurableRuns,
    client: DBOSClient,
    url: str,
    owner: str,
    run_ids: list[str],
    task_group: anyio.abc.TaskGroup,
    refused: set[str],
    configs: _Configs,
) -> None:
    # Its lock free: `owner` is dead (None: it lives, or another is taking its runs now).
    lock = await anyio.to_thread.run_sync(try_lock, url, owner)
    if lock is None:
        return
    try:
        for run_id in run_ids:
            left = False
            differs: str | None = None

            async def still_theirs(run_id: str = run_id) -> bool:
                nonlocal left, differs
                # Looked at again under the locks: another replica, or a `runs resume`, may
                # have taken it meanwhile.
                found = await client.list_workflows_async(
                    workflow_ids=[run_id], load_input=False, load_output=False
                )
                if not found or _replicas(found[0]) != owner:
                    return False
                try:
                    execution = await _execution(client, run_id)
                    if found[0].status == "PENDING" and (
                        execution is None or execution.get("stopped") is not None
                    ):
                        return False
                    await runs.get(run_id)  # its input and events: refused here, not in DBOS's
                    differs = await configs.differs(runs, run_id)
                except PickledRecord as exc:
                    _refuse(run_id, exc, refused)
                    return False
                if differs is not None and not configs.waited(run_id):
                    return False  # for a replica on its config, if one lives
                left = execution is not None and execution.get("left") is True
                return True

            if await runs.take_over(run_id, still=still_theirs):
                _said_taken(owner, run_id, left=left, differs=differs)
                task_group.start_soon(_finish, runs, run_id)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(lock.close)  # its session's end releases the lock


def _said_taken(owner: str, run_id: str, *, left: bool, differs: str | None) -> None:
    if differs is not None:
        how = "left" if left else "died"
        _log.warning(
            "replica %s %s: run %s goes on here, on another config than it started on (%s): "
            "its agents and tools may differ",
            owner,
            how,
            run_id,
            differs,
        )
    elif left:
        _log.info("replica %s left (told to go): run %s goes on here", owner, run_id)
    else:
        _log.warning("replica %s died: run %s goes on here", owner, run_id)


def _refuse(run_id: str, exc: PickledRecord, refused: set[str]) -> None:
    refused.add(run_id)
    _log.warning("run %s is not taken over: %s", run_id, exc)


async def _finish(runs: DurableRuns, run_id: str) -> None:
    try:
        await runs.follow(run_id, pause=False)
        _log.info("run %s (taken over) finished", run_id)
    except Exception as exc:
        _log.warning("run %s (taken over) stopped: %s", run_id, exc)
