"""Served agent runs kept in the run store: each goes on in the background of the serving
process, and the call that started it follows it.

With a run store (`serve --store`, `[store] url`), a call of an agent tool starts a durable
run (`DurableRuns.begin`) and waits for its end. A call that needs a person's approval is
asked of the client that started the run:

- a 2025-11-25 client that declared elicitation is asked during the call; its answer goes to
  the run as the decision (a DBOS message, as `runs approve` sends), unless a decision from
  elsewhere came first (then the form is withdrawn); a client gone answers nothing;
- a 2026-07-28 client that declared it gets the waiting calls in an input-required round, its
  `requestState` naming the run; the retry's answers go to the run as decisions, and the retry
  follows the run on;
- a client that can be asked nothing gets a run handle: the result names the run and how to
  decide (the `get_run`, `approve_run`, `deny_run` tools, or `runs approve` on the store),
  and the run waits, durable.

The run goes on when the request that follows it ends, unless its client cancelled it (a
2025-11-25 `notifications/cancelled`) or the server ended it as it stops (the run would stop
right after): then the call answers once the run has unwound here. A dropped connection, a
closed session, a 2026-07-28 client that closed its stream (also what one that dies does)
leave it going on.

A run whose process died (a restart) is taken over here by the first call that decides on it
or asks after it (`adopt`). An agent on the client's own model is not stored: its model lives
in the request.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from pydantic import JsonValue

from ...approval import ApprovalRequest, Approver, Decision
from ...errors import AlreadyDecided, GatewayError, UnknownRun
from ...limits import PerNode
from ...run_state import RunOrigin, RunResult, RunState, spent
from ...store_config import store_option
from ...trace import JoinsMidway, OpenSpan, TraceEvent, TraceHook
from ..client_requests.approvals import ClientApprover, answer_key, decision_of
from ..running_calls import RunningCalls
from ..transports.auth import authenticated_subject

if TYPE_CHECKING:
    from ...durable import DurableRuns

__all__ = [
    "ROUND_STATE_PREFIX",
    "Relay",
    "StoredAgentRuns",
    "client_decider",
    "handle_result",
    "round_run_id",
    "waiting_json",
]

_log = logging.getLogger(__name__)

_ENDED = ("succeeded", "failed", "cancelled")
UNWIND_WAIT = 1.0
"""How long a call whose run stops with it (cancelled, or ended as the server stops) waits for
the run to unwind before it answers: well within the slack the HTTP server gives the answers
of the calls it ends (`draining.ANSWER_SLACK`)."""

MAX_SHOWN_RUNS = 10_000
"""Runs whose shown waiting calls are kept (a few call names each), the newest."""

ROUND_STATE_PREFIX = "stored-run:"
"""The `requestState` of an input-required round of a stored run: this and the run's id."""


class Relay:
    """A run's trace events to whoever follows the run now (nobody: they are dropped). One
    that follows a run under way is told first of the spans open (`JoinsMidway`): a round's
    retry, `approve_run`, follow it on inside its sub-agents, whose work progress names.

    It is one of the run's own hooks (`DurableRuns.hooks`), so it lasts as long as the run
    executes here: however the run ends, nothing is left of it."""

    def __init__(self) -> None:
        self._target: TraceHook | None = None
        self._open: dict[str, OpenSpan] = {}

    def attach(self, follower: TraceHook) -> None:
        self._target = follower
        if isinstance(follower, JoinsMidway):  # told before any event: no await till then
            follower.joined(list(self._open.values()))

    def detach(self) -> None:
        self._target = None

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "start":
            self._open[event.id] = OpenSpan(event, time.monotonic())
        elif event.phase in ("end", "error"):
            self._open.pop(event.id, None)
        target = self._target
        if target is not None:
            await target(event)


class StoredAgentRuns:
    """The serving process's stored runs: started, followed, decided on, taken over."""

    def __init__(
        self,
        runs: DurableRuns,
        origin: RunOrigin | None = None,
        *,
        running: RunningCalls | None = None,
    ) -> None:
        self.runs = runs
        self.origin = origin
        """How the process serves (its config, `--model`): kept in each run it starts, so
        that `agent-gateway resume` continues it the same way."""
        self._running = running or RunningCalls()
        """The server's calls: when it ends them (it stops), their runs stop here too."""
        self._shown: dict[str, frozenset[str]] = {}
        """Per run, the waiting calls its client was last shown (a handle, `get_run`, a
        decision's answer): a decision without `call` is for those only (`shown`)."""

    def showing(self, run_id: str, waiting: Sequence[ApprovalRequest]) -> None:
        """Keep that the run's client is shown `waiting` (none: forget the run)."""
        self._shown.pop(run_id, None)  # the newest last: the oldest go first
        if waiting:
            self._shown[run_id] = frozenset(r.call for r in waiting)
            if len(self._shown) > MAX_SHOWN_RUNS:  # a run forgotten is asked about again
                del self._shown[next(iter(self._shown))]

    def shown(self, run_id: str) -> frozenset[str]:
        """The run's waiting calls its client was last shown here (none: not shown here)."""
        return self._shown.get(run_id, frozenset())

    @property
    def store_option(self) -> str:
        """What names this store on the command line: " --store URL" ("" for the default)."""
        return store_option(self.runs.url)

    def log_waiting(self, run_id: str, waiting: Sequence[ApprovalRequest]) -> None:
        """Tell the gateway's operator (its log) how to decide on a run a client got a handle
        of: the command in full, with the store, which the client is not shown."""
        calls = ", ".join(f"{r.short} ({r.tool})" for r in waiting)
        _log.warning(
            "run %s waits for a person's approval of %s: agent-gateway runs approve|deny %s %s%s",
            run_id,
            calls,
            run_id,
            waiting[0].short,
            self.store_option,
        )

    async def usage_so_far(self, run_id: str) -> dict[str, JsonValue]:
        """What the run's model calls cost by its last checkpoint, its sub-agents' included
        (as `run --no-wait --json` says it)."""
        state = await self.runs.state(run_id)
        return spent(state).model_dump(mode="json") if state is not None else {}

    async def start(
        self,
        state: RunState,
        *,
        follower: TraceHook,
        hops: int,
        quota: PerNode,
        asker: Approver | None,
        stop: anyio.Event | None = None,
        lent: tuple[str, ...] = (),
    ) -> RunResult | list[ApprovalRequest]:
        """Start `state` and follow it (`stop` as `follow` takes it): its result, or the calls
        waiting for a decision that nobody here is asking for (an `asker` asking during the
        call has none)."""
        asking = isinstance(asker, ClientApprover)
        await self.begin(state, hops=hops, quota=quota, asker=asker, lent=lent)
        return await self.follow(state.run_id, follower, pause=not asking, stop=stop)

    async def begin(
        self,
        state: RunState,
        *,
        hops: int,
        quota: PerNode,
        asker: Approver | None = None,
        lent: tuple[str, ...] = (),
    ) -> None:
        """Start `state` in the background; `asker` (asking during the call) is asked; `lent`:
        the slots its request's callers lent it (`node_slots`)."""
        from ...durable import RunOptions  # imported by whoever opened the store already

        on_approval = (
            self._asking(asker, state.run_id) if isinstance(asker, ClientApprover) else None
        )
        options = RunOptions(
            hooks=[Relay()],
            hops=hops,
            lent=lent,
            quota=quota,
            stream=True,
            on_approval=on_approval,
        )
        await self.runs.begin(state, options)

    async def follow(
        self,
        run_id: str,
        follower: TraceHook,
        *,
        decided: Sequence[str] = (),
        pause: bool = True,
        stop: anyio.Event | None = None,
    ) -> RunResult | list[ApprovalRequest]:
        """Follow a run executing here (taken over first if its process is gone) until it
        ends or, with `pause`, waits on calls other than `decided`. Cancelled, the run stops
        too (it stays stored) if `stop` is set: the client cancelled its request
        (`connection.cancel_requested`). Any other end of the request (its connection
        dropped, its session closed, a 2026-07-28 client closed its stream, which is its
        only way to cancel) leaves the run going on. A run executing in another live process
        (a replica behind the same load balancer) is followed there, through the store: its
        result, or the calls waiting."""
        if await self.runs.running_elsewhere(run_id):
            return await self.runs.follow_elsewhere(
                run_id, decided=decided, pause=pause, follower=follower
            )
        try:
            await self.adopt(run_id)
        except UnknownRun:
            # It ended between the caller's look and now (it ran in this process's
            # background): its end, not the operator's words on resuming it.
            ended = await self.ended(run_id)
            if isinstance(ended, RunResult):
                return ended
            if ended is None:
                raise
            raise GatewayError(ended) from None
        relay = self._relay(run_id)
        if relay is not None:  # else it ended just now: `runs.follow` says how
            relay.attach(follower)
        try:
            return await self.runs.follow(run_id, decided=decided, pause=pause)
        except anyio.get_cancelled_exc_class():
            if (stop is not None and stop.is_set()) or self._running.ended is not None:
                # The client cancelled, or the server stops (which would stop the run right
                # after): answered once the run has unwound, so that nothing of the request
                # (its spans, its calls' cancellations) outlives the answer.
                await self.runs.interrupt_and_wait(run_id, within=UNWIND_WAIT)
                if self._running.ended is not None and not self.runs.replica:
                    # Nobody takes it over (a replica's runs go on in another): the
                    # operator resumes it, as its client was told (`note_stored`).
                    _log.warning(
                        "run %s stopped: the gateway stopped before it ended; to continue "
                        "it: agent-gateway runs resume %s%s",
                        run_id,
                        run_id,
                        self.store_option,
                    )
            raise
        finally:
            if relay is not None:
                relay.detach()

    def _relay(self, run_id: str) -> Relay | None:
        """The relay of the run executing here."""
        return next((hook for hook in self.runs.hooks(run_id) if isinstance(hook, Relay)), None)

    async def ended(self, run_id: str) -> RunResult | str | None:
        """A run that has ended: its result if it succeeded, else what ended it; None while
        it goes on. Raises `UnknownRun` if it is not stored."""
        info = await self.runs.get(run_id)
        if info.status not in _ENDED:
            return None
        found = await self.runs.result(run_id) if info.status == "succeeded" else None
        if found is not None:
            return found
        return f"run {run_id} {info.status}" + (f": {info.error}" if info.error else "")

    async def adopt(self, run_id: str) -> None:
        """Continue a run that does not execute in any live process here. Raises
        `UnknownRun` for a run that has ended or runs in another live process."""
        from ...durable import RunOptions

        if self.runs.here(run_id):
            return
        # A run the store's outage stopped here is taken up with its own options (its relay).
        await self.runs.adopt(run_id, RunOptions(hooks=[Relay()], stream=True))

    async def owns(self, run_id: str, *, task: bool = False) -> bool:
        """Whether the calling client started the run (the same authenticated subject, or
        none for both), with `task` as an MCP task. Raises `UnknownRun` if it is not
        stored."""
        state = await self.runs.state(run_id)
        if state is None:
            raise UnknownRun(f"no stored run {run_id!r}")
        return state.started_by == authenticated_subject() and (state.task or not task)

    async def decide(
        self, run_id: str, calls: Sequence[ApprovalRequest], decision: Decision
    ) -> None:
        """Raises `AlreadyDecided` naming the calls decided before (the others are sent)."""
        refused: list[str] = []
        for request in calls:
            try:
                await self.runs.decide(run_id, request.call, decision, by=client_decider())
            except AlreadyDecided as exc:
                refused.append(str(exc))
        if refused:
            raise AlreadyDecided("; ".join(refused))

    async def answer_round(
        self, run_id: str, answers: Mapping[str, types.InputResponse] | None
    ) -> list[str]:
        """Send a round's answers to the run as decisions; the calls decided."""
        waiting = await self.runs.waiting(run_id)
        decided: list[str] = []
        for call, request in waiting.items():
            answer = (answers or {}).get(answer_key(request))
            if answer is not None:
                with suppress(AlreadyDecided):  # decided elsewhere meanwhile: that stands
                    decision = decision_of(answer)
                    await self.runs.decide(run_id, call, decision, by=client_decider())
                decided.append(call)
        return decided

    def _asking(self, asker: ClientApprover, run_id: str) -> Any:
        by = client_decider()  # now, in the request: the run asks in its own task

        async def ask(request: ApprovalRequest) -> None:
            await self.ask_client(asker, run_id, request, by=by)

        return ask

    async def ask_client(
        self, asker: ClientApprover, run_id: str, request: ApprovalRequest, *, by: str
    ) -> None:
        """Show the client the form for `request` and send its answer to the run as the
        decision. The run waits for a decision from elsewhere too (`runs approve`,
        `approve_run`): a client that is gone sends none, and one that answers after another
        decision came is not heard (whoever cancels this, once decided, withdraws the form)."""
        try:
            decision = await asker.ask(request)
            if decision is not None:
                with suppress(AlreadyDecided):  # decided elsewhere meanwhile: that stands
                    await self.runs.decide(run_id, request.call, decision, by=by)
        except Exception:  # no answer: the call waits for a decision from elsewhere
            _log.exception("asking the client about %s of run %s failed", request.call, run_id)


def client_decider() -> str:
    """Who decides, as a decision the calling MCP client sends records it."""
    subject = authenticated_subject()
    return f"MCP client {subject}" if subject else "an MCP client"


def round_run_id(request_state: str | None) -> str | None:
    """The stored run an input-required round's retry continues, if it is one."""
    if request_state is None or not request_state.startswith(ROUND_STATE_PREFIX):
        return None
    return request_state.removeprefix(ROUND_STATE_PREFIX) or None


def waiting_json(requests: Sequence[ApprovalRequest]) -> list[dict[str, JsonValue]]:
    return [
        {"call": r.short, "tool": r.tool, "input": r.input, "agents": list[JsonValue](r.agents)}
        for r in requests
    ]


def handle_result(
    run_id: str, waiting: Sequence[ApprovalRequest], usage: dict[str, JsonValue]
) -> types.CallToolResult:
    """What a client that can be asked nothing is told of a run waiting for approval, with
    what its model calls cost so far (`usage_so_far`). The command for the gateway's machine
    does not name the store: its URL or path is the operator's (`log_waiting` tells the
    operator in full)."""
    lines = [f"Run {run_id} is waiting for a person's approval of:"]
    for request in waiting:
        said = json.dumps(request.input, ensure_ascii=False)
        lines.append(f"  call {request.short}: {request.tool} {said} (agent {request.agents[-1]})")
    lines.append(
        f'Decide with the approve_run or deny_run tool ({{"run_id": "{run_id}", "call": '
        f'"{waiting[0].short}", "message": "..."}}; without "call", every call listed here); the '
        f'answer comes back then, or later from get_run ({{"run_id": "{run_id}"}}). On the '
        f"gateway's machine, its operator can run: agent-gateway runs approve {run_id} "
        f"{waiting[0].short}"
    )
    run: dict[str, JsonValue] = {
        "run_id": run_id,
        "status": "waiting_approval",
        "waiting": list[JsonValue](waiting_json(waiting)),
    }
    return types.CallToolResult(
        content=[types.TextContent(text="\n".join(lines))],
        structured_content={"usage": usage, "run": run},
    )
