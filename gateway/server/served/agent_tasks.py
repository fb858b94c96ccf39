"""Agent calls as MCP tasks (2025-11-25): the task is the stored run.

With a run store, a 2025-11-25 client that asks for a task on a `tools/call` of an agent
(`params.task`) gets a `CreateTaskResult` at once, and the agent runs in the background. The
task's id is the durable run's id, so the task outlives the connection and the serving
process: a gateway serving the same store reports it and finishes it.

- `tasks/get`: the run's status: `working`, `input_required` (a call waits for approval:
  `tasks/result` asks a client that declared elicitation; else `approve_run` / `deny_run` or
  `runs approve`), `completed`, `failed` (its error as the status message), `cancelled`.
- `tasks/result`: waits for the run's end and returns its `CallToolResult`; the approval
  forms it shows meanwhile carry the task in `_meta` (`io.modelcontextprotocol/related-task`),
  as the result does.
- `tasks/cancel`: cancels the run (as `runs cancel`).
- `tasks/list`: the runs this client started as tasks (its other runs are no tasks: the
  run tools see them).

The SDK validates a `tools/call` result as a `CallToolResult`, so a server middleware creates
the task ahead of it. On 2026-07-28 tasks are an extension (`io.modelcontextprotocol/tasks`)
that the SDK does not implement; they are not offered there.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from agent import AgentError
from toolkits import ToolkitError, error_result, in_background

from ...catalog import echoed
from ...errors import GatewayError, UnknownRun
from ...run_state import RunResult
from ...trace import TraceEvent
from ..client_requests.approvals import ClientApprover, client_approver
from ..running_calls import AGAIN, RunningCalls, note_if_ended
from ..wire_results import tool_result_for
from .agents import AgentTools, run_result
from .run_failures import run_ended, stored_failure
from .stored_runs import StoredAgentRuns, client_decider

if TYPE_CHECKING:
    from ...durable import RunInfo

__all__ = ["RELATED_TASK", "AgentTasks", "task_status"]

RELATED_TASK = "io.modelcontextprotocol/related-task"
POLL_MS = 500
_DAY_MS = 86_400_000
_FINAL = {"succeeded": "completed", "failed": "failed", "cancelled": "cancelled"}


def task_status(info: RunInfo) -> tuple[types.TaskStatus, str | None]:
    """A run's status as a task's, with a message for a person."""
    if info.status in _FINAL:
        final = cast(types.TaskStatus, _FINAL[info.status])
        return final, info.error if final == "failed" else None
    if info.waiting:
        calls = ", ".join(f"{r.short} ({r.tool})" for r in info.waiting)
        return "input_required", (
            f"waiting for approval of {calls}: tasks/result asks a client that can be asked; "
            f'or approve_run / deny_run {{"run_id": "{info.run_id}"}}'
        )
    if info.status == "stopped" and not info.orphaned:
        return "failed", info.error
    return "working", None


async def _dropped(event: TraceEvent) -> None:
    """Nobody follows a task's events: it is polled."""


class AgentTasks:
    """The task methods and the middleware that turns an agent call into a task."""

    def __init__(
        self, agents: AgentTools, stored: StoredAgentRuns, running: RunningCalls | None = None
    ) -> None:
        """`tasks/result` requests run in `running`, which may end them (the server is
        stopping): the run goes on."""
        self._agents = agents
        self._stored = stored
        self._runs = stored.runs
        self._running = running or RunningCalls()

    async def middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """A 2025-11-25 `tools/call` of an agent with `task`: the task, at once."""
        raw = ctx.params
        if (
            ctx.method != "tools/call"
            or ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
            or not isinstance(raw, Mapping)
            or raw.get("task") is None
            or not self._agents.is_agent(str(raw.get("name")))
        ):
            return await call_next(ctx)
        params = types.CallToolRequestParams.model_validate(raw, by_name=False)
        refusing = self._running.refusing
        if refusing is not None:  # the server is stopping: no new run
            said = f"the call to {params.name!r} was stopped: {refusing} {AGAIN}"
            return tool_result_for(error_result(said), ctx.protocol_version)
        begun = await self._agents.begin_task(ctx, params)
        if isinstance(begun, types.CallToolResult):
            return tool_result_for(begun, ctx.protocol_version)
        return {"task": self._wire(await self._runs.get(begun))}

    async def get(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskRequestParams
    ) -> dict[str, Any]:
        return self._wire(await self._info(params.task_id))

    async def result(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        """The run's `CallToolResult` once it ends; meanwhile its calls waiting for approval
        are asked of this client if it can be asked."""
        run_id = params.task_id
        info = await self._info(run_id)
        try:
            # Not refused while the server stops: it waits on a call made before.
            outcome = await self._running.answer(
                partial(self._outcome, ctx, info), partial(_ended, run_id), refusable=False
            )
        except (AgentError, GatewayError, ToolkitError) as exc:
            outcome = await stored_failure(self._stored, info.agent or "?", run_id, exc)
        wire = tool_result_for(outcome, ctx.protocol_version)  # as its era has tools/call's
        wire["_meta"] = {**wire.get("_meta", {}), RELATED_TASK: {"taskId": run_id}}
        return wire

    async def cancel(
        self, ctx: ServerRequestContext[Any, Any], params: types.CancelTaskRequestParams
    ) -> dict[str, Any]:
        info = await self._info(params.task_id)
        status, _ = task_status(info)
        if status in ("completed", "failed", "cancelled"):
            raise MCPError(INVALID_PARAMS, f"task {info.run_id} has ended ({status})")
        await self._runs.cancel(info.run_id)
        self._runs.interrupt(info.run_id)
        return self._wire(await self._runs.get(info.run_id))

    async def list(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams
    ) -> dict[str, Any]:
        tasks: list[dict[str, Any]] = []
        for info in await self._runs.list(limit=100):
            if await self._stored.owns(info.run_id, task=True):
                tasks.append(self._wire(info))
        return {"tasks": tasks}

    async def _info(self, run_id: str) -> RunInfo:
        """The run of a task of this client's, taken over if its process is gone."""
        try:
            if not await self._stored.owns(run_id, task=True):
                raise UnknownRun(run_id)
            info = await self._runs.get(run_id)
            if info.orphaned:
                await self._stored.adopt(run_id)
                info = await self._runs.get(run_id)
        except UnknownRun:
            raise MCPError(INVALID_PARAMS, f"no task {echoed(run_id)}") from None
        return info

    async def _outcome(
        self, ctx: ServerRequestContext[Any, Any], info: RunInfo
    ) -> types.CallToolResult:
        run_id = info.run_id
        note_if_ended(
            "The task goes on where a gateway serves its store: ask for its result again."
        )
        # A form the task depends on is related to it (spec 2025-11-25, tasks).
        asker = client_approver(ctx, None, {RELATED_TASK: {"taskId": run_id}})
        asking = asker if isinstance(asker, ClientApprover) else None
        asked: list[str] = []
        by = client_decider()
        # The forms shown while the run goes on: withdrawn when it ends (a decision on their
        # calls may come from elsewhere: `runs approve`, `approve_run`).
        async with in_background(anyio.sleep_forever, wait_started=False) as forms:
            while True:
                status, message = task_status(info)
                if status == "completed":
                    found = await self._runs.result(run_id)
                    if found is None:
                        return error_result(f"run {run_id} left no result")
                    return self._result(found)
                if status in ("failed", "cancelled"):
                    agent = info.agent or "?"
                    return error_result(
                        run_ended(self._stored, agent, run_id, info.status, message)
                    )
                outcome = await self._stored.follow(
                    run_id, _dropped, decided=asked, pause=asking is not None
                )
                if isinstance(outcome, RunResult):
                    return self._result(outcome)
                assert asking is not None
                for request in outcome:
                    if request.call not in asked:
                        asked.append(request.call)
                        forms.start_soon(
                            partial(self._stored.ask_client, asking, run_id, request, by=by)
                        )
                info = await self._runs.get(run_id)

    def _wire(self, info: RunInfo) -> dict[str, Any]:
        """The run as a task on the wire; its `ttl` is the store's `keep_days` (a lower bound:
        a run is deleted that long after it finished; null: kept until deleted)."""
        status, message = task_status(info)
        days = self._runs.keep_days
        ttl = round(days * _DAY_MS) if days else None
        task = types.Task(
            task_id=info.run_id,
            status=status,
            status_message=message,
            created_at=_iso(info.created_ms),
            last_updated_at=_iso(info.updated_ms or info.created_ms),
            ttl=ttl,
            poll_interval=POLL_MS,
        )
        # `ttl` is required on the wire, null included.
        return {**task.model_dump(by_alias=True, mode="json", exclude_none=True), "ttl": ttl}

    def _result(self, result: RunResult) -> types.CallToolResult:
        spec = self._agents.spec(result.agent)
        steps = spec.options.return_intermediate_steps if spec is not None else False
        return run_result(result, steps=steps, items=len(result.items) > 1, stored=True)


def _ended(run_id: str, why: str) -> types.CallToolResult:
    return error_result(f"tasks/result for task {run_id} was stopped: {why}")


def _iso(ms: int | None) -> str:
    return datetime.fromtimestamp((ms or 0) / 1000, UTC).isoformat().replace("+00:00", "Z")
