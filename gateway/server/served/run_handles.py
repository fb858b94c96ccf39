"""`get_run`, `approve_run`, `deny_run`, `cancel_run`: stored runs for clients that can be
asked nothing, or stop them in no other way.

Served with a run store. A client whose agent call needs a person's approval, and that
declared no way to be asked, gets a run handle (`stored_runs.handle_result`); with these tools
it sees the run (status, waiting calls with tool and input, the answer once finished) and
decides. A decision's call follows the run on, as the agent call would have: it answers with
the run's output (or the next calls waiting), and a client that stops waiting can ask
`get_run` later, because the run goes on in the serving process's background either way.
`cancel_run` stops a run for good (as `runs cancel`): a 2026-07-28 client has no other way,
since closing its request, as a client that dies does, leaves the run going on.

A client sees only the runs it started (the same authenticated subject, or none for both).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from agent import AgentError
from toolkits import ToolkitError, error_result, in_background

from ...approval import ApprovalRequest, Decision
from ...catalog import echoed
from ...durable.status import ACTIVE_STATUSES
from ...errors import AlreadyDecided, GatewayError, PickledDecision, PickledRecord, UnknownRun
from ...run_state import RunResult
from ..connection import cancel_requested
from ..notifications.run_progress import HEARTBEAT_SECONDS, McpNotifier
from .run_failures import item_failed
from .stored_runs import StoredAgentRuns, waiting_json

if TYPE_CHECKING:
    from ...durable import RunInfo

__all__ = ["RUN_TOOLS", "RunHandles"]

_RUN_ID = {"type": "string", "description": "The run's id, as the agent call's result named it."}
_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "run_id": _RUN_ID,
        "call": {
            "type": "string",
            "description": "The waiting call to decide on (e.g. c1); without it, every one you were "
            "shown (by the run handle, get_run or the last decision's answer).",
        },
        "message": {
            "type": "string",
            "description": "Told to the agent with the decision (why, what instead, or how).",
        },
    },
    "required": ["run_id"],
    "additionalProperties": False,
}
_RUN_ONLY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"run_id": _RUN_ID},
    "required": ["run_id"],
    "additionalProperties": False,
}
RUN_TOOLS = ("get_run", "approve_run", "deny_run", "cancel_run")

_log = logging.getLogger(__name__)


class _RunArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_id: str
    call: str | None = None
    message: str | None = None


_TOOLS = [
    types.Tool(
        name="get_run",
        description="A stored agent run started by this client: its status, the calls "
        "waiting for approval (tool and input), its answer once finished.",
        input_schema=_RUN_ONLY_SCHEMA,
    ),
    types.Tool(
        name="approve_run",
        description="Approve a stored run's call waiting for approval (or all of "
        "them); the run goes on, and this answers with its output or what it waits "
        "for next.",
        input_schema=_DECISION_SCHEMA,
    ),
    types.Tool(
        name="deny_run",
        description="Refuse a stored run's call waiting for approval (or all of "
        "them): the agent is told, with the message, and goes on; this answers with "
        "its output or what it waits for next.",
        input_schema=_DECISION_SCHEMA,
    ),
    types.Tool(
        name="cancel_run",
        description="Stop a stored agent run started by this client, for good: its calls in "
        "flight end, and it is not resumed. Answers with its status.",
        input_schema=_RUN_ONLY_SCHEMA,
    ),
]
"""The run tools (never changed: served to every client as they are)."""


class RunHandles:
    """The run tools, over the serving process's stored runs."""

    def __init__(self, stored: StoredAgentRuns, *, progress_interval: float = HEARTBEAT_SECONDS):
        self._stored = stored
        self._runs = stored.runs
        self._progress_interval = progress_interval

    async def tools(self) -> list[types.Tool]:
        return _TOOLS  # the same list each time: the router's listing keeps what it made of it

    def node_of(self, name: str) -> str | None:
        return "runs" if name in RUN_TOOLS else None

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            args = _RunArgs.model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(e["msg"] for e in exc.errors())
            return error_result(f"invalid arguments for {params.name}: {problems}")
        try:
            await self._check_owner(args.run_id)
        except UnknownRun as exc:
            return error_result(str(exc))
        except PickledRecord as exc:
            return _unread(params.name, args.run_id, exc)
        try:
            if params.name == "get_run":
                return await self._report(args.run_id)
            if params.name == "cancel_run":
                return await self._cancel(args.run_id)
            return await self._decide(ctx, params.name == "approve_run", args)
        except AlreadyDecided as exc:
            return error_result(str(exc))
        except PickledRecord as exc:
            return _unread(params.name, args.run_id, exc)
        except UnknownRun:  # it ended, or another replica took it, since the owner check
            return await self._gone_meanwhile(args.run_id)
        except (AgentError, GatewayError, ToolkitError) as exc:
            if await self._status(args.run_id) == "cancelled":  # meanwhile, by the operator
                return await self._gone_meanwhile(args.run_id)
            return error_result(f"run {args.run_id} failed: {exc} (it is stored)")

    async def _status(self, run_id: str) -> str | None:
        try:
            return (await self._runs.get(run_id)).status
        except UnknownRun:
            return None

    async def _gone_meanwhile(self, run_id: str) -> types.CallToolResult:
        """What the client is told of a run that left its reach while it asked: where the
        run is now, in its words, not the operator's (the store's URL, a command line)."""
        status = await self._status(run_id)
        if status is None:
            return error_result(f"run {run_id} is no longer stored")
        if status in ACTIVE_STATUSES:
            return error_result(f"run {run_id} is busy elsewhere ({status}): ask again soon")
        return error_result(f"run {run_id} has ended ({status}): get_run shows it")

    async def _check_owner(self, run_id: str) -> None:
        try:
            owned = await self._stored.owns(run_id)
        except UnknownRun:
            owned = False
        if not owned:
            raise UnknownRun(f"no run {echoed(run_id)} started by this client")

    async def _report(self, run_id: str) -> types.CallToolResult:
        info = await self._runs.get(run_id)
        if info.orphaned:  # its process is gone (a restart): a stored run is meant to finish
            await self._stored.adopt(run_id)
            info = await self._runs.get(run_id)
        result = await self._runs.result(run_id) if info.status == "succeeded" else None
        return self._shown_report(info, result)

    async def _cancel(self, run_id: str) -> types.CallToolResult:
        try:
            await self._runs.cancel(run_id)
        except UnknownRun:  # it is the caller's (checked): it has ended
            info = await self._runs.get(run_id)
            return error_result(f"run {run_id} has ended ({info.status}): get_run shows it")
        return _report(await self._runs.get(run_id), None)

    async def _decide(
        self, ctx: ServerRequestContext[Any, Any], approved: bool, args: _RunArgs
    ) -> types.CallToolResult:
        waiting = await self._runs.waiting(args.run_id)
        if args.call is None:  # the calls the client was shown, never one it has not seen
            shown = self._stored.shown(args.run_id)
            chosen = [r for r in waiting.values() if r.call in shown]
            if waiting and not chosen:
                return self._not_shown(args.run_id, list(waiting.values()))
        else:
            chosen = [r for r in waiting.values() if args.call in (r.call, r.short)]
        if not chosen:
            calls = ", ".join(r.short for r in waiting.values()) or "none"
            return error_result(
                f"run {args.run_id}: no call {args.call!r} waits for approval (waiting: {calls})"
                if args.call is not None
                else f"run {args.run_id}: no call waits for approval"
            )
        await self._stored.decide(
            args.run_id, chosen, Decision(approved=approved, message=args.message)
        )
        notifier = McpNotifier(ctx, heartbeat=self._progress_interval, stored=True)
        async with in_background(notifier.keep_alive, wait_started=False):
            outcome = await self._stored.follow(
                args.run_id,
                notifier,
                decided=[r.call for r in chosen],
                stop=cancel_requested(ctx),
            )
        if isinstance(outcome, RunResult):
            return self._shown_report(await self._runs.get(args.run_id), outcome)
        return self._shown_report(await self._runs.get(args.run_id), None, waiting=outcome)

    def _not_shown(self, run_id: str, waiting: list[ApprovalRequest]) -> types.CallToolResult:
        """A decision without `call` when the client was shown none of the calls waiting
        now (they began waiting since, or it was shown them elsewhere): they are shown, and
        decided by the next such decision."""
        self._stored.showing(run_id, waiting)
        calls = "; ".join(
            f"{r.short}: {r.tool} {json.dumps(r.input, ensure_ascii=False)}" for r in waiting
        )
        return error_result(
            f"run {run_id}: nothing was decided, since you were not shown the calls waiting "
            f'now: {calls}. Decide one with "call", or call again without it for these'
        )

    def _shown_report(
        self,
        info: RunInfo,
        result: RunResult | None,
        *,
        waiting: list[ApprovalRequest] | None = None,
    ) -> types.CallToolResult:
        """`_report`, its waiting calls kept as the ones the client was shown."""
        self._stored.showing(info.run_id, info.waiting if waiting is None else waiting)
        return _report(info, result, waiting=waiting)


def _unread(tool: str, run_id: str, refused: PickledRecord) -> types.CallToolResult:
    """A run (or a decision sent to it) an older version stored in the pickle format, which
    this gateway does not read: the operator is told what to do (its log), the client that
    only the operator can."""
    _log.warning("%s of run %s: %s", tool, run_id, refused)
    what = "a decision on it" if isinstance(refused, PickledDecision) else "it"
    return error_result(
        f"run {run_id} cannot be read here: {what} was stored by an older agent-gateway, in "
        "a format this gateway reads only if its operator allows it"
    )


def _report(
    info: RunInfo, result: RunResult | None, *, waiting: list[ApprovalRequest] | None = None
) -> types.CallToolResult:
    """The run as a tool result: its answer as text once finished, else its status."""
    pending = info.waiting if waiting is None else waiting
    report: dict[str, JsonValue] = {
        "run_id": info.run_id,
        "status": "waiting_approval" if pending and info.status == "running" else info.status,
        "agent": info.agent,
        "waiting": list[JsonValue](waiting_json(pending)),
        "error": info.error,
    }
    if result is not None:
        # As the store has it: a run whose every item failed has failed (and ended).
        failed = all(i.error is not None for i in result.items)
        report["status"] = "failed" if failed else "succeeded"
        item = result.items[0]
        report["output"] = item.structured if item.structured is not None else item.output
        report["usage"] = result.usage.model_dump(mode="json")
        if len(result.items) > 1:
            report["items"] = [{"output": i.output, "error": i.error} for i in result.items]
        text = (
            item.output or ""
            if item.error is None
            else item_failed(result.agent, item.error, info.run_id)
        )
    elif pending:
        calls = "; ".join(
            f"{r.short}: {r.tool} {json.dumps(r.input, ensure_ascii=False)}" for r in pending
        )
        text = f"run {info.run_id} waits for approval of {calls} (approve_run or deny_run)"
    else:
        text = f"run {info.run_id} is {report['status']}" + (
            f": {info.error.rstrip('.')}" if info.error else ""  # a sentence of ours ends it
        )
        if info.status == "stopped":
            text += (
                f". The gateway's operator can continue it (agent-gateway runs resume "
                f"{info.run_id})"
            )
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=report)
