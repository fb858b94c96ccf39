"""Runs as DBOS workflows in a SQLite file or a PostgreSQL database.

DBOS is one instance per process: `opening.open_runs` launches it (and destroys it on exit).
Each run is a workflow whose body (`workflow`) is the engine's own `Gateway.resume`, every
model and tool call a recorded step. `DurableRuns` starts, resumes, follows and steers them;
what it reads of the store (lists, steps, checkpoints) is `stored.StoredRuns`'s.

A run that fails (its model is down, say) or is interrupted does not end: its workflow stays
pending, so it can be resumed, here or in another process, once the cause is fixed (by one
process at a time: `claims`). A run cancelled from any process (`runs cancel`) stops where it
runs, its calls in flight too: DBOS would notice only at its next step, and never in a wait
for approval. A serving replica that is told to go (`hand_over`) interrupts its runs without
marking them stopped: they are in flight still, and another replica finishes them
(`replicas`). The runs of a serving process's background that its PostgreSQL store's outage
stopped go on there once the store is back (`stranded`). What a run keeps is JSON, and a
record in Python's pickle format is refused unread (`record_format`).
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Awaitable, Callable, Collection, Generator, Sequence
from contextlib import contextmanager, nullcontext

import anyio
from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
from dbos._error import DBOSAwaitedWorkflowCancelledError

from ..approval import ApprovalRequest, Decision
from ..engine import Gateway
from ..errors import (
    GatewayError,
    RunCancelled,
    StoreError,
    StoreGone,
    StoreUnavailable,
    UnknownRun,
)
from ..run_state import RunOrigin, RunResult, RunState, stored_result
from ..store_config import redacted, store_option
from ..trace import TraceHook
from .approvals import OnWait
from .claims import CLAIM_WAIT, Claim, claim
from .decisions import send_decision, this_person
from .endings import WATCH_SECONDS, ItemsFailed, taken
from .record_format import stored_as
from .replicas import (
    REPLICA_PREFIX,
    alive,
    follow_elsewhere,
    on_postgres,
    owner_of,
)
from .so_far import recorded_so_far
from .status import ACTIVE_STATUSES, RunInfo
from .store_file import StoreFile
from .stored import StoredRuns
from .workflow import Execution, Host, RunOptions, run_workflow

__all__ = ["DurableRuns", "RunOptions"]

_log = logging.getLogger(__name__)


APP_VERSION = "agent-gateway-runs-1"
"""Fixed, not DBOS's hash of the code: records are found by name, so any version resumes."""
POLL_SECONDS = 0.05
"""How often a resumed run's queue and a finished run's outcome are looked for."""
NOTIFICATION_POLL_SECONDS = 0.1
"""SQLite has no notifications: DBOS polls (and waits this long for its poller to stop)."""
STOP_TIMEOUT = 10.0
"""How long an interrupted run may take to unwind its calls."""
UNREACHABLE_WAIT = 60.0
"""How long runs wait for a PostgreSQL store that became unreachable (`[store]
unreachable_wait`)."""


class DurableRuns(StoredRuns):
    """The runs of one store, from the process that opened it: read (`StoredRuns`), started,
    resumed, followed and steered."""

    def __init__(
        self,
        url: str,
        host: Host,
        *,
        queue: str | None,
        keep_days: float = 0,
        file: StoreFile | None = None,
    ) -> None:
        super().__init__(url, host.client)
        self._file = file
        """A SQLite store's file, as this process opened it (`store_file`)."""
        self.keep_days = keep_days
        """Finished runs are deleted this long after (0: never; `retention`)."""
        self._host = host
        self._queue = queue
        """The queue only this process listens to (None: it runs no workflows)."""
        self._unfinished: dict[str, RunState] = {}
        """Each run driven here that ended without its result, as `made_here` says it."""
        self.stranded: dict[str, RunOptions] = {}
        """Runs of this process's background that its store's outage stopped, and how each
        goes on here once the store is back (`stranded`)."""

    @property
    def replica(self) -> bool:
        """Whether this process is a serving replica (another takes its runs over)."""
        return self._queue is not None and self._queue.startswith(REPLICA_PREFIX)

    @property
    def unreachable_wait(self) -> float | None:
        """How long the runs here wait for a PostgreSQL store that became unreachable
        (`outage`), or a SQLite store another process locked (`sqlite_lock`), before they
        stop; None: no store this process runs on."""
        host = self._host  # not `outage or lock`: an outage's truth is DBOS's retry question
        waits = host.outage.wait if host.outage is not None else None
        return host.lock.wait if host.lock is not None else waits

    @unreachable_wait.setter
    def unreachable_wait(self, seconds: float) -> None:
        for waits in (self._host.outage, self._host.lock):
            if waits is not None:
                waits.wait = seconds

    @contextmanager
    def deleting(self, what: str) -> Generator[None]:
        """While the block deletes `what` (`retention`), a SQLite store found locked is not
        said to be locked by another process: this one may hold the lock (`sqlite_lock`)."""
        lock = self._host.lock
        with lock.busy_here(what) if lock is not None else nullcontext():
            yield

    def gone(self) -> StoreGone | None:
        """Why the runs here can no longer be kept, if the store's SQLite file was deleted
        (or replaced) since it was opened."""
        return self._file.gone() if self._file is not None else None

    def stop_for_store(self, error: StoreUnavailable) -> None:
        """The store stayed unreachable for the whole wait (each run stays resumable from its
        last recorded step), or its file is gone: every run here stops with `error`. Those of
        this process's background that an outage stopped go on here once the store is back
        (`stranded`)."""
        for run_id, execution in list(self._host.executions.items()):
            if execution.error is None:
                execution.error = error
            execution.scope.cancel()
            if (
                execution.background
                and not execution.cancelled
                and not isinstance(error, StoreGone)
            ):
                options = execution.options
                # The request that lent it slots, and its client's form, are gone by then.
                self.stranded[run_id] = RunOptions(
                    hooks=options.hooks, hops=options.hops, stream=options.stream
                )
                _log.warning(
                    "run %s stopped: %s; it goes on here once the store is back (should this "
                    "process end first: agent-gateway runs resume %s%s)",
                    run_id,
                    error,
                    run_id,
                    store_option(self.url),
                )
            if not execution.running:  # a resumed run that never began here
                execution.finished.set()
                execution.begun.set()
                execution.stir()
                if execution.background:  # nothing else ends it: taken up anew, if at all
                    del self._host.executions[run_id]

    async def take_up(self, run_id: str) -> bool:
        """Take a run the store's outage stopped here (`stranded`) up again: whether it goes on
        here now. Not if another process took it while this one was away from the store, or
        it was cancelled meanwhile (it is forgotten); raises what reading the store raises."""
        options = self.stranded.get(run_id)
        if options is None or self.here(run_id):  # still unwinding here: at the next look
            return False

        async def still_ours() -> bool:
            with self._reading(run_id):
                found = await self._client.list_workflows_async(
                    workflow_ids=[run_id], load_input=False, load_output=False
                )
            return (
                bool(found)
                and found[0].status in ("PENDING", "ENQUEUED")
                and owner_of(found[0]) == self._queue
            )

        if not await self.take_over(run_id, options, still=still_ours):
            del self.stranded[run_id]
            return False
        del self.stranded[run_id]
        _log.warning("the run store is back: run %s goes on here", run_id)
        return True

    def hand_over(self) -> None:
        """This process is about to go (SIGTERM): a replica's runs, interrupted as it goes, are
        left in flight for another replica to finish; any other process's stop as usual."""
        if self.replica:
            self._host.leaving = True

    def supersede_all(self) -> None:
        """Another process took this one's lock while it was away from the store: it is
        taking the runs executing here over. They stop here, left in flight for it."""
        for execution in self._host.executions.values():
            if execution.error is None:
                execution.error = GatewayError(
                    "this process lost the store for a while and another took its runs over:"
                    " the run goes on there (its result will be in the store)"
                )
            execution.superseded = True
            execution.scope.cancel()
        self.stranded.clear()  # they go on there too

    async def stop_all(self) -> None:
        """Interrupt every run executing here and wait (at most `STOP_TIMEOUT`) for each to
        unwind, so that nothing of it runs on once another process may take it over."""
        executions = list(self._host.executions.values())
        for execution in executions:
            execution.scope.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT):
            for execution in executions:
                if execution.running:
                    await execution.finished.wait()

    def use(
        self,
        gateway: Gateway,
        *,
        hooks: Sequence[TraceHook] = (),
        stream: bool = False,
        on_approval: OnWait | None = None,
    ) -> None:
        """Run this process's workflows on `gateway`; `on_approval` hears of each call that
        starts waiting for a person's approval."""
        host = self._host
        host.gateway, host.hooks, host.stream, host.on_approval = (
            gateway,
            hooks,
            stream,
            on_approval,
        )

    async def start(self, state: RunState) -> RunResult:
        """Run `state` as a new durable run (its id is the workflow's) to the end.

        Raises what stopped the run (it stays resumable), or the cancellation that
        interrupted it."""
        self._need_launch()
        execution = self._host.executions[state.run_id] = Execution()
        try:
            with self._writing():
                handle = await _start_workflow(state)
            return await self._outcome(handle, execution)
        finally:
            self._driven(state.run_id, execution)

    async def resume(self, run_id: str, *, origin: RunOrigin | None = None) -> RunResult:
        """Take over a run that stopped (it failed, or its process died) and run it to the
        end here; `origin` replaces how it was started (kept for later resumes).

        Raises `UnknownRun` as `resumable` does: of two resumes at the same moment, the second
        to take the run's claim lock finds it running in the first (`claims`)."""
        self._need_launch()
        held = await claim(self.url, run_id)
        try:
            await self.resumable(run_id)
            # Through a queue only this process listens to: no other process picks the run up.
            assert self._queue is not None
            execution = self._host.executions[run_id] = Execution(origin=origin)
            try:
                with self._writing():
                    await DBOS.register_queue_async(self._queue, polling_interval_sec=POLL_SECONDS)
                    handle = await DBOS.resume_workflow_async(run_id, queue_name=self._queue)
                return await self._outcome(handle, execution, resumed=True, claimed=held)
            finally:
                self._driven(run_id, execution)
        finally:
            await held.release()

    def _driven(self, run_id: str, execution: Execution) -> None:
        """A run driven here has ended here, with its result or without."""
        del self._host.executions[run_id]
        if execution.result is None and execution.checkpoint is not None:
            records = execution.records or {}
            self._unfinished[run_id] = recorded_so_far(execution.checkpoint, records)

    def made_here(self, run_id: str) -> RunState | None:
        """What a run driven here (`start`, `resume`) that ended without its result did so far
        as this process knows it (`so_far`), stored or not: what the store, away, cannot say."""
        return self._unfinished.get(run_id)

    async def begin(self, state: RunState, options: RunOptions | None = None) -> None:
        """Start `state` as a new run that goes on in the background of this process (as long
        as it lives); `follow` it."""
        self._need_launch()
        execution = self._host.executions[state.run_id] = Execution(
            options=options or RunOptions(), background=True
        )
        try:
            with self._writing():
                execution.handle = await _start_workflow(state)
        except BaseException:
            del self._host.executions[state.run_id]  # not begun: nothing ends it later
            raise

    def here(self, run_id: str) -> bool:
        """Whether the run executes in this process now."""
        return run_id in self._host.executions

    def hooks(self, run_id: str) -> Sequence[TraceHook]:
        """The trace hooks the run executing here was given (`RunOptions.hooks`); none if it
        does not execute here. They go with it: what one holds lives as long as the run does
        here."""
        execution = self._host.executions.get(run_id)
        return execution.options.hooks if execution is not None else ()

    async def adopt(self, run_id: str, options: RunOptions | None = None) -> None:
        """Take over a run that stopped (its process died, say) in the background here,
        unless it runs here already. Raises `UnknownRun` as `resumable` does."""
        self._need_launch()
        if self.here(run_id) or await self.take_up(run_id):
            return

        async def resumable() -> bool:
            await self.resumable(run_id)
            return True

        await self.take_over(run_id, options, still=resumable)

    async def take_over(
        self,
        run_id: str,
        options: RunOptions | None = None,
        *,
        still: Callable[[], Awaitable[bool]] | None = None,
    ) -> bool:
        """Run `run_id` in the background here, whoever ran it (`adopt`, a dead replica's run,
        a `stranded` one): whether it was. Under the run's claim lock, as `resume` (`claims`):
        `still` (None: yes) says under it whether the run is still to be taken, and the lock
        is held until the run has begun here. Raises what `claim` and `still` raise."""
        queue = self._queue
        assert queue is not None
        held = await claim(self.url, run_id)
        try:
            if still is not None and not await still():
                return False
            execution = self._host.executions[run_id] = Execution(
                options=options or RunOptions(), background=True
            )
            try:
                with self._writing():
                    await DBOS.register_queue_async(queue, polling_interval_sec=POLL_SECONDS)
                    execution.handle = await DBOS.resume_workflow_async(run_id, queue_name=queue)
            except BaseException:
                del self._host.executions[run_id]  # not taken over: nothing ends it later
                raise
            with anyio.move_on_after(CLAIM_WAIT):  # until it runs here, for the next to see
                await execution.begun.wait()
            return True
        finally:
            await held.release()

    async def running_elsewhere(self, run_id: str) -> bool:
        """Whether the run executes in another live process (on PostgreSQL: its process
        holds its lock; on SQLite: its process on this machine lives)."""
        if self.here(run_id):
            return False
        if on_postgres(self.url):
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_input=False, load_output=False
            )
            owner = owner_of(found[0]) if found else None
            return owner is not None and owner != self._queue and await alive(self.url, owner)
        info = await self.get(run_id)
        return info.status in ("running", "waiting_approval") and info.error is None

    async def follow_elsewhere(
        self,
        run_id: str,
        *,
        decided: Collection[str] = (),
        pause: bool = True,
        follower: TraceHook | None = None,
    ) -> RunResult | list[ApprovalRequest]:
        """`follow` for a run executing in another process, through the store; `follower`
        hears of each call recorded meanwhile."""
        return await follow_elsewhere(
            self._client, run_id, decided=decided, pause=pause, follower=follower
        )

    async def follow(
        self, run_id: str, *, decided: Collection[str] = (), pause: bool = True
    ) -> RunResult | list[ApprovalRequest]:
        """Wait for a run executing here to end (its result), or with `pause`, to wait for a
        decision on a call not in `decided` (the calls waiting then).

        Raises what stopped the run, `GatewayError` if it was interrupted, `UnknownRun` if
        it does not execute here."""
        # One adopted (`adopt`) may have ended in this process's background already.
        execution = self._host.executions.get(run_id) or self._host.ended.get(run_id)
        if execution is None:
            raise UnknownRun(f"run {run_id!r} does not run in this process")
        execution.followed = True
        while True:
            stirred = execution.stirred
            if execution.finished.is_set():
                if execution.error is not None:
                    raise execution.error
                if execution.result is None:
                    # Cancelled from elsewhere as it stopped here, it is not resumable.
                    await self._still_going(run_id)
                    raise GatewayError(f"run {run_id!r} was interrupted: it is stored, resumable")
                if execution.handle is not None:  # until DBOS has recorded the end, too
                    return await self._recorded(execution.handle, execution)
                return execution.result
            waiting = execution.waiting
            if pause and waiting and not any(call in waiting for call in decided):
                execution.unfollowed()  # it may wait for days, nobody following
                return list(waiting.values())
            await stirred.wait()

    def leave_waiting(self, run_id: str) -> None:
        """Stop the run executing here as a call of it waits for a person (`--no-wait`): its
        waits for a decision end, the other calls of the step run to their end (each
        recorded), and then its driver gets `WaitLeft`; the store says it was left waiting,
        not interrupted. Cancelling the driver meanwhile cuts those calls off (they run again
        when the run resumes, as after a kill)."""
        execution = self._host.executions.get(run_id)
        if execution is not None:
            execution.left_waiting = True
            if execution.approvals is not None:
                execution.approvals.leave()

    def interrupt(self, run_id: str) -> None:
        """Stop a run executing here (its calls end; it stays resumable)."""
        execution = self._host.executions.get(run_id)
        if execution is not None:
            execution.scope.cancel()

    async def interrupt_and_wait(self, run_id: str, *, within: float) -> None:
        """`interrupt` it, and wait (at most `within` seconds, whatever cancels the caller)
        until it has unwound here: its calls have ended, its trace's spans too."""
        execution = self._host.executions.get(run_id)
        if execution is None:
            return
        execution.scope.cancel()
        if execution.running:
            with anyio.CancelScope(shield=True), anyio.move_on_after(within):
                await execution.finished.wait()

    async def resumable(self, run_id: str) -> RunInfo:
        """The run, if it can be resumed here. Raises `UnknownRun` for a run that is not
        stored, has ended, or is still running in a live process on this machine."""
        info = await self.get(run_id)
        if info.status not in ACTIVE_STATUSES:
            raise UnknownRun(
                f"run {run_id!r} has ended ({info.status}): it cannot be resumed; "
                f"`agent-gateway runs show {run_id}{store_option(self.url)}` shows it"
            )
        going = info.status in ("running", "waiting_approval") and info.error is None
        if going and info.host == socket.gethostname():
            raise UnknownRun(
                f"run {run_id!r} is running in process {info.pid} on this machine: stop that "
                "process first, or wait for it"
            )
        if going and on_postgres(self.url) and await self.running_elsewhere(run_id):
            raise UnknownRun(
                f"run {run_id!r} is running in process {info.pid} on {info.host}: stop that "
                "process first, or wait for it"
            )
        return info

    async def _outcome(
        self,
        handle: WorkflowHandleAsync[str],
        execution: Execution,
        *,
        resumed: bool = False,
        claimed: Claim | None = None,
    ) -> RunResult:
        """The run's result once it ends here; `claimed` is let go once it has begun. Resumed,
        it may never begin here: DBOS hands a run to the last process that claimed it, and
        another one may have after this one (`take_over`)."""
        try:
            while resumed and not execution.begun.is_set():
                with anyio.move_on_after(WATCH_SECONDS):
                    await execution.begun.wait()
                if not execution.begun.is_set() and not execution.running:
                    await self._still_ours(handle.workflow_id)
            if claimed is not None:
                await claimed.release()
            await execution.finished.wait()
        except anyio.get_cancelled_exc_class():
            execution.scope.cancel()  # the run's own calls end: it stays resumable
            if execution.running:
                with anyio.CancelScope(shield=True), anyio.move_on_after(STOP_TIMEOUT):
                    await execution.finished.wait()
            raise
        if execution.error is not None:
            raise execution.error
        return await self._recorded(handle, execution)

    async def _still_going(self, run_id: str) -> None:
        """Raises `RunCancelled` if the store says the run was cancelled, or what `resumable`
        raises for a run that has ended otherwise."""
        info = await self.get(run_id)
        if info.status == "cancelled":
            raise RunCancelled(f"run {run_id} was cancelled")
        if info.status not in ACTIVE_STATUSES:
            await self.resumable(run_id)

    async def _still_ours(self, run_id: str) -> None:
        """Raises `taken` unless the run waits for this process's queue or this process has
        claimed it (`RunCancelled` if it was cancelled meanwhile): the row says who has it."""
        with self._reading(run_id):
            found = await self._client.list_workflows_async(
                workflow_ids=[run_id], load_input=False, load_output=False
            )
        if not found:
            raise UnknownRun(f"run {run_id!r} was deleted from {redacted(self.url)}")
        row = found[0]
        if row.status == "CANCELLED":
            raise RunCancelled(f"run {run_id} was cancelled")
        holder = row.queue_name if row.status == "ENQUEUED" else row.executor_id
        if holder != self._queue:
            raise taken(run_id, self.url)

    async def _recorded(self, handle: WorkflowHandleAsync[str], execution: Execution) -> RunResult:
        """The result DBOS recorded for a run that ended here (at most `STOP_TIMEOUT` later).
        Not recorded by then: another process claimed it meanwhile (`taken`), else the
        store did not answer."""
        with anyio.move_on_after(STOP_TIMEOUT):
            try:
                done = await handle.get_result(polling_interval_sec=POLL_SECONDS)
            except DBOSAwaitedWorkflowCancelledError:  # at its very end
                raise RunCancelled(f"run {handle.workflow_id} was cancelled") from None
            except Exception as exc:
                if not stored_as(exc, ItemsFailed):
                    raise
                assert execution.result is not None
                return execution.result
            return stored_result(done, handle.workflow_id)
        await self._still_ours(handle.workflow_id)
        raise StoreUnavailable(
            f"run {handle.workflow_id!r} ended here, but the run store did not record its end "
            f"within {STOP_TIMEOUT:g} s: `agent-gateway runs show {handle.workflow_id}"
            f"{store_option(self.url)}` shows where it is"
        )

    async def decide(
        self, run_id: str, call: str, decision: Decision, *, by: str | None = None
    ) -> None:
        """Send the decision on `call` to the run, wherever it runs (or when it resumes);
        `by` says who decides (default: this process's user and host).

        The first decision on a call stands: raises `AlreadyDecided` if another one was sent
        before (from any process; while the run's process lives or not), naming it."""
        with self._reading(run_id):
            await send_decision(
                self._client, self.url, run_id, call, decision, by=by or this_person()
            )

    async def cancel(self, run_id: str) -> None:
        """Stop the run wherever it runs (one executing here has stopped on return); it is not
        resumed. Raises `UnknownRun` for a run that is not stored or has ended (DBOS would
        leave it as it was, and say nothing)."""
        info = await self.get(run_id)
        if info.status not in ACTIVE_STATUSES:
            raise UnknownRun(
                f"run {run_id!r} has ended ({info.status}): it cannot be cancelled; "
                f"`agent-gateway runs show {run_id}{store_option(self.url)}` shows it"
            )
        with self._reading(run_id):
            await self._client.cancel_workflow_async(run_id)
        execution = self._host.executions.get(run_id)
        if execution is not None and execution.running:
            # Here: stopped now, not at the watch's next look, and its calls ended on return.
            execution.cancelled = True
            execution.scope.cancel()
            with anyio.move_on_after(STOP_TIMEOUT):
                await execution.finished.wait()

    def _need_launch(self) -> None:
        if self._queue is None:
            raise StoreError("the run store was opened to read only")


async def _start_workflow(state: RunState) -> WorkflowHandleAsync[str]:
    """`state`'s workflow, started. Shielded: a Ctrl-C then still finds the run stored (as
    it is told), not lost between DBOS's awaits before its insert; the run itself stops
    right after, with the rest of the process's runs (`stop_all`)."""
    handle: WorkflowHandleAsync[str] | None = None
    with SetWorkflowID(state.run_id), anyio.CancelScope(shield=True):
        handle = await DBOS.start_workflow_async(run_workflow, state.model_dump_json())
    assert handle is not None  # a shielded scope is not cancelled
    return handle
