"""The workflow body of a stored run, and what it needs from the process that runs it.

The body is the engine's own `Gateway.resume`, handed a `DbosJournal` that records each model
and tool call as a DBOS step under the engine's name for it, and a checkpoint that keeps the
latest `RunState` (`checkpoints`: what each step added, as a DBOS step of its own). A run that
fails or is interrupted does not end: its workflow stays pending (`Stopped`), so it can be
resumed, here or in another process. The process that drove it learns of the failure from its
`Execution`, not from DBOS.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Generator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from dbos import DBOS, DBOSClient, WorkflowHandleAsync
from pydantic import JsonValue
from sqlalchemy.exc import SQLAlchemyError

from toolkits import NodeStopped
from toolkits.errors import find_error

from ..approval import WAITS_FOR_APPROVAL, ApprovalRequest, WaitLeft
from ..engine import Gateway
from ..errors import RunCancelled, StoreUnavailable
from ..limits import PerNode
from ..run_state import RunOrigin, RunResult, RunState, stored_state
from ..trace import TraceHook
from .approvals import APPROVALS_EVENT, DbosApprovals, OnWait, open_questions
from .checkpoints import Checkpoints, state_of
from .dbos_journal import DbosJournal
from .endings import ItemsFailed, cancelled_by_dbos, failed_items, lost_to_another, taken
from .outage import Outage
from .record_format import refusing_for
from .sqlite_lock import LockWait
from .status import (
    CHECKPOINT_STEP,
    EXECUTION_EVENT,
    LEFT_WAITING,
    RESULT_EVENT,
    STATE_EVENT,
    call_name,
    this_process,
)
from .store_failures import store_failure

__all__ = ["WORKFLOW", "Execution", "Host", "RunOptions", "Stopped", "hosting", "run_workflow"]


_log = logging.getLogger(__name__)

WORKFLOW = "agent-gateway.run"
STORE_LOOK = 5.0
"""How long a run that lost its claim looks in the store for why (cancelled, or taken)."""


class Stopped(BaseException):
    """Leaves a run's workflow pending: DBOS records what an `Exception` ends with as the
    workflow's final error, and lets anything else through unrecorded."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How one run goes in this process, besides what `DurableRuns.use` set for all."""

    hooks: Sequence[TraceHook] = ()
    """Besides the process's own."""
    hops: int = 0
    lent: tuple[str, ...] = ()
    """The slots its request's callers lent it (`node_slots`): this process's only."""
    quota: PerNode | None = None
    stream: bool | None = None
    on_approval: OnWait | None = None
    """Instead of the process's: hears of each call that starts waiting for a decision."""


class Ended:
    """Set once a run's workflow body has ended here; an event is made only for a wait (one
    is ~0.8 kB, and a run may wait for a decision for days with nobody following it)."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: anyio.Event | None = None

    def set(self) -> None:
        self._set = True
        if self._event is not None:
            self._event.set()

    def is_set(self) -> bool:
        return self._set

    async def wait(self) -> None:
        if self._set:
            return
        if self._event is None:
            self._event = anyio.Event()
        await self._event.wait()


@dataclass(slots=True)
class Execution:
    """A run's workflow body in this process, and what the driver waiting on it learns."""

    origin: RunOrigin | None = None
    """How the run resumes now (another --model, ...): kept in its next checkpoint."""
    options: RunOptions = field(default_factory=RunOptions)
    background: bool = False
    """Started by `begin` or `adopt`: it leaves `executions` itself when it ends."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    finished: Ended = field(default_factory=Ended)
    begun: Ended = field(default_factory=Ended)
    """Its workflow body has recorded that it runs here (or has ended): another resumer
    finds it running (`claims`)."""
    error: BaseException | None = None
    result: RunResult | None = None
    waiting: dict[str, ApprovalRequest] = field(default_factory=dict[str, ApprovalRequest])
    """Its calls waiting for a decision now."""
    _stirred: anyio.Event | None = field(default=None, init=False, repr=False)
    handle: WorkflowHandleAsync[str] | None = None
    checkpoint: RunState | None = None
    """Its latest state made here, kept in the store or not (the store may be away)."""
    records: dict[str, JsonValue] | None = None
    """The results of its calls, recorded before or here, by call name (`so_far`), for its
    driver (`made_here`); None for a background run: nobody asks, and it may wait for days."""
    running: bool = False
    """Its workflow body has begun here (`stop_all` waits for those only)."""
    followed: bool = False
    """A driver follows it (`DurableRuns.follow`): it need not be kept once ended."""
    cancelled: bool = False
    """`runs cancel` (from any process) stopped it."""
    left_waiting: bool = False
    """Its driver stops it as a call waits for a person (`--no-wait`): not an interruption;
    a call it cuts off after that (Ctrl-C) ends paused (`Tracer.pausing`), not failed."""
    approvals: DbosApprovals | None = None
    """Its approver, once its workflow body has begun here (`DurableRuns.leave_waiting`)."""
    superseded: bool = False
    """Another process is taking it over (this one was away from the store): it is left in
    flight, as when this process goes."""

    @property
    def stirred(self) -> anyio.Event:
        """Set (and replaced) when a call starts or stops waiting, and when the run ends.
        Made for a follower only: a run waiting for days with nobody following holds none
        (an event is ~0.8 kB)."""
        if self._stirred is None:
            self._stirred = anyio.Event()
        return self._stirred

    def unfollowed(self) -> None:
        """A follower left: the event it made goes, unless another follower waits on it."""
        if self._stirred is not None and not self._stirred.statistics().tasks_waiting:
            self._stirred = None

    def stir(self) -> None:
        if self._stirred is not None:
            self._stirred.set()
            self._stirred = None


@dataclass(slots=True)
class Host:
    """What the workflow body needs from the process that runs it (DBOS has one per process)."""

    client: DBOSClient
    url: str
    """The store's, for the commands a message names."""
    gateway: Gateway | None = None
    hooks: Sequence[TraceHook] = ()
    stream: bool = False
    on_approval: OnWait | None = None
    executions: dict[str, Execution] = field(default_factory=dict[str, Execution])
    ended: dict[str, Execution] = field(default_factory=dict[str, Execution])
    """The background runs that ended here last (at most `ENDED_KEPT`, oldest out first),
    for a driver that adopted one to follow it still: it may end before `follow` looks."""
    leaving: bool = False
    """The process is going away: its interrupted runs are left in flight, not stopped."""
    outage: Outage | None = None
    """A PostgreSQL store's: whether it is reachable."""
    lock: LockWait | None = None
    """A SQLite store's: whether another process holds its lock."""

    @property
    def store_away(self) -> bool:
        """Whether a write now would wait for the store (unreachable, or locked)."""
        return (self.outage is not None and self.outage.unreachable) or (
            self.lock is not None and self.lock.held
        )


ENDED_KEPT = 64
"""Background runs ended here that `follow` still finds (`Host.ended`)."""


def _keep_ended(host: Host, run_id: str, execution: Execution) -> None:
    """Keep how a background run that nobody followed yet ended (`Host.ended`): not what it
    ran with (its hooks: a served client's relay), nor its error's traceback (whose frames
    hold them too). An error that cannot be copied so is not kept: `follow` then says the
    run does not run here, and the store says how it ended."""
    error = execution.error
    if error is not None:
        try:
            error = copy.copy(error)  # made anew from its arguments: no traceback, no cause
        except Exception:
            return
    host.ended[run_id] = Execution(
        finished=execution.finished, error=error, result=execution.result, handle=execution.handle
    )
    if len(host.ended) > ENDED_KEPT:
        del host.ended[next(iter(host.ended))]


_host: Host | None = None
"""The host of this process's workflows while a store is open here (`hosting`)."""


@DBOS.workflow(name=WORKFLOW)
async def run_workflow(initial: str) -> str:
    run_id = DBOS.workflow_id
    host = _host
    execution = host.executions.get(run_id) if host is not None and run_id else None
    if host is None or host.gateway is None or run_id is None or execution is None:
        # Picked up by a process that did not ask for it: leave it for the one that will.
        raise Stopped
    execution.running = True
    try:
        done = await _execute(host, host.gateway, run_id, initial, execution)
    finally:
        execution.finished.set()
        execution.begun.set()
        execution.stir()
        if execution.background and host.executions.get(run_id) is execution:
            del host.executions[run_id]
            if not execution.followed:
                _keep_ended(host, run_id, execution)
    failed = failed_items(execution.result)
    if failed is not None:
        raise ItemsFailed(failed)  # DBOS records the run as failed: it has ended
    return done


async def _execute(
    host: Host, gateway: Gateway, run_id: str, initial: str, execution: Execution
) -> str:
    here = this_process()
    try:
        # Read live (a DBOS read inside the workflow would itself be a recorded, replayed step).
        with refusing_for(run_id):  # a record in the pickle format is not read: the run stops
            steps = await host.client.list_workflow_steps_async(run_id)
        recorded: dict[str, JsonValue] = {
            s["function_name"]: s["output"]
            for s in steps
            if s["error"] is None and s["function_name"] != CHECKPOINT_STEP
        }
        received = [s["output"] for s in steps if s["function_name"] == "DBOS.recv"]
        if not execution.background:
            execution.records = {call_name(name): output for name, output in recorded.items()}
        for _ in range(max((s["function_id"] for s in steps), default=0)):
            DBOS.reserve_step()  # new steps go after the recorded ones, whatever their order
        with refusing_for(run_id):
            saved = await host.client.get_event_async(run_id, STATE_EVENT, timeout_seconds=0)
            left = await host.client.get_event_async(run_id, APPROVALS_EVENT, timeout_seconds=0)
        # A process that claimed it after this one (`take_over`) runs it instead: DBOS lets
        # the last claimer go on, and this one learns so at its first write, next.
        state = state_of(run_id, saved, steps) or stored_state(initial, run_id)
        if execution.origin is not None:
            state = state.model_copy(update={"origin": execution.origin})
        await DBOS.set_event_async(EXECUTION_EVENT, {**here, "stopped": None})
        execution.begun.set()  # a resumer waiting for its claim (`claims`) finds it running

        checkpoints = Checkpoints(steps, saved)  # each writes what the run's records lack

        async def checkpoint(latest: RunState) -> None:
            execution.checkpoint = latest
            await checkpoints(latest)

        options = execution.options
        approvals = execution.approvals = DbosApprovals(
            received,
            options.on_approval or host.on_approval,
            pending=execution.waiting,
            on_change=execution.stir,
            earlier=open_questions(left),
        )
        with execution.scope, refusing_for(run_id):  # a decision (a message) pickled, say
            result = await gateway.resume(
                state,
                checkpoint=checkpoint,
                journal=DbosJournal(recorded, execution.records),
                approver=approvals,
                hooks=(*host.hooks, *options.hooks),
                stream=host.stream if options.stream is None else options.stream,
                hops=options.hops,
                lent=options.lent,
                quota=options.quota,
                pausing=lambda: WAITS_FOR_APPROVAL if execution.left_waiting else None,
            )
            execution.result = result
            if failed_items(result) is not None:  # failed: DBOS keeps no output of it
                await DBOS.set_event_async(RESULT_EVENT, result.model_dump_json())
            return result.model_dump_json()
        # Left in flight as this replica goes, or as another takes it over: it goes on there.
        stopped = (
            None
            if _leaving(host, execution) and not execution.cancelled
            else LEFT_WAITING
            if execution.left_waiting
            else "interrupted"
        )
    except WaitLeft as left:  # the step's other calls have ended, each recorded
        execution.error = left
        stopped = LEFT_WAITING
    except Exception as exc:
        if _leaving(host, execution) and find_error(exc, NodeStopped) is not None:
            stopped = None  # its MCP servers stopped first: in flight still, as above
        else:
            if execution.error is None:  # else the store's outage stopped it (and this followed)
                execution.error = _store_failed(host.url, exc)
            stopped = str(execution.error) or type(exc).__name__
    except BaseException as exc:
        if lost_to_another(exc):
            # Nothing of it may be written here any more: it was cancelled (DBOS drops a
            # cancelled run's owner) or another process resumed it after this one.
            if not await _cancelled(host, run_id):
                execution.error = taken(run_id, host.url)
                raise Stopped from None
        elif not cancelled_by_dbos(exc):
            raise
        execution.cancelled = True  # DBOS saw it first, at a step
        stopped = "cancelled"
    if execution.cancelled:
        execution.error = RunCancelled(f"run {run_id} was cancelled")
        raise Stopped  # DBOS has recorded the end
    if host.store_away:
        raise Stopped  # it would wait for the store: its process, gone, says it stopped
    with anyio.CancelScope(shield=True):
        try:
            # In flight still (None) is a hand-over: "left" tells its taker it was no crash.
            said = {**here, "stopped": stopped, "left": stopped is None}
            await DBOS.set_event_async(EXECUTION_EVENT, said)
        except SQLAlchemyError as exc:  # its disk full, say: the driver hears why it stopped
            failed = store_failure(host.url, exc, doing="write to")
            _log.warning("run %s stopped, and the store was not told: %s", run_id, failed)
            if execution.error is None:
                execution.error = failed
    raise Stopped


def _store_failed(url: str, exc: Exception) -> Exception:
    """`exc`, or the store's failure in it as one line (a step's record, a checkpoint, not
    written: the store locked, its disk full)."""
    said = find_error(exc, StoreUnavailable)  # locked too long (`sqlite_lock`)
    if said is not None:
        return said
    failed = find_error(exc, SQLAlchemyError)
    return store_failure(url, failed, doing="write to") if failed is not None else exc


async def _cancelled(host: Host, run_id: str) -> bool:
    """Whether the store says the run was cancelled (else, or unread: taken elsewhere)."""
    with anyio.CancelScope(shield=True), anyio.move_on_after(STORE_LOOK):
        try:
            found = await host.client.list_workflows_async(
                workflow_ids=[run_id], load_input=False, load_output=False
            )
        except Exception:  # the store is away: the run is not this execution's either way
            return False
        return bool(found) and found[0].status == "CANCELLED"
    return False


def _leaving(host: Host, execution: Execution) -> bool:
    return host.leaving or execution.superseded


@contextmanager
def hosting(host: Host) -> Generator[None]:
    """`host` runs this process's workflows for the block (DBOS has one per process)."""
    global _host
    _host = host
    try:
        yield
    finally:
        _host = None
