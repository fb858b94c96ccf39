"""An in-process MCP server whose one tool, `later`, runs only as a task (2025-11-25).

The test steers each task (`TaskServer.move`, `tell`, `finish`) and sees what the client asked
of it: the tasks it created (`created`, with their arguments), and those it cancelled
(`cancelled`). The tool's own `tools/call` without `task` is refused, as a task-only tool's is.
Each change of a task's status is a second later than the one before (`lastUpdatedAt`), or
at the same time when the test says so (a server whose clock did not tick between two).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

__all__ = ["TaskServer"]

Context = ServerRequestContext[Any, Any]


_CREATED = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class _Task:
    id: str
    arguments: dict[str, Any]
    session: Any
    """The session that created it, which `tell` notifies."""
    poll_interval: int
    status: types.TaskStatus = "working"
    message: str | None = "started"
    seconds: int = 0
    """`lastUpdatedAt`, in seconds after its creation."""
    outcome: types.CallToolResult | MCPError | None = None
    ended: anyio.Event = field(default_factory=anyio.Event)

    def change(self, status: types.TaskStatus, message: str | None, *, later: bool = True) -> None:
        self.status, self.message = status, message
        self.seconds += later

    def wire(self) -> dict[str, Any]:
        task = types.Task(
            task_id=self.id,
            status=self.status,
            status_message=self.message,
            created_at=_CREATED.isoformat(),
            last_updated_at=(_CREATED + timedelta(seconds=self.seconds)).isoformat(),
            ttl=60_000,
            poll_interval=self.poll_interval,
        )
        return task.model_dump(by_alias=True, mode="json", exclude_none=True)


class TaskServer:
    """A low-level server with one task-only tool (see the module)."""

    def __init__(self, *, poll_interval: int = 100) -> None:
        """`poll_interval`: the milliseconds between two `tasks/get` it suggests."""
        self.poll_interval = poll_interval
        self.tasks: list[_Task] = []
        self.created = anyio.Event()
        self.cancelled: list[str] = []
        self.cancel_seen = anyio.Event()
        self.refusal: str | None = None
        """When set, a task's creation is refused with this message (invalid params)."""
        execution = types.ToolExecution(task_support="required")
        self.tool = types.Tool(name="later", input_schema={"type": "object"}, execution=execution)
        self.server: Server[Any] = Server(
            "tasks", on_list_tools=self._list_tools, on_call_tool=self._plain_call
        )
        self.server.middleware.append(self._as_task)
        add = self.server.add_request_handler
        add("tasks/get", types.GetTaskRequestParams, self._get)
        add("tasks/result", types.GetTaskPayloadRequestParams, self._result)
        add("tasks/cancel", types.CancelTaskRequestParams, self._cancel)

    def move(self, status: types.TaskStatus, message: str, *, later: bool = True) -> None:
        """The latest task's new status, told at its next `tasks/get`; `later=False`: updated
        at the same time as the one before."""
        self.tasks[-1].change(status, message, later=later)

    async def tell(self, status: types.TaskStatus, message: str, *, later: bool = True) -> None:
        """`move`, and say so at once (`notifications/tasks/status`)."""
        self.move(status, message, later=later)
        await self.notify(self.tasks[-1].wire())

    async def notify(self, wire: dict[str, Any]) -> None:
        """Send a `notifications/tasks/status` of `wire` (a task's, as `_Task.wire` made it)."""
        params = types.TaskStatusNotificationParams.model_validate(wire, by_name=False)
        await self.tasks[-1].session.send_notification(types.TaskStatusNotification(params=params))

    def finish(self, outcome: types.CallToolResult | MCPError) -> None:
        """End the latest task with `outcome`: its result, or the error `tasks/result` sends."""
        task = self.tasks[-1]
        ended = "completed" if isinstance(outcome, types.CallToolResult) else "failed"
        task.change(ended, task.message)
        task.outcome = outcome
        task.ended.set()

    async def _list_tools(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[self.tool])

    async def _plain_call(
        self, _ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        raise MCPError(types.METHOD_NOT_FOUND, f"{params.name} runs only as a task")

    async def _as_task(self, ctx: Context, call_next: CallNext) -> HandlerResult:
        raw = ctx.params
        if ctx.method != "tools/call" or not isinstance(raw, dict) or raw.get("task") is None:
            return await call_next(ctx)
        if self.refusal is not None:
            raise MCPError(types.INVALID_PARAMS, self.refusal)
        arguments: dict[str, Any] = raw.get("arguments") or {}
        task = _Task(
            id=f"task-{len(self.tasks) + 1}",
            arguments=arguments,
            session=ctx.session,
            poll_interval=self.poll_interval,
        )
        self.tasks.append(task)
        self.created.set()
        return {"task": task.wire()}

    def _find(self, task_id: str) -> _Task:
        for task in self.tasks:
            if task.id == task_id:
                return task
        raise MCPError(types.INVALID_PARAMS, f"no task {task_id}")

    async def _get(self, _ctx: Context, params: types.GetTaskRequestParams) -> dict[str, Any]:
        return self._find(params.task_id).wire()

    async def _result(
        self, _ctx: Context, params: types.GetTaskPayloadRequestParams
    ) -> dict[str, Any]:
        task = self._find(params.task_id)
        await task.ended.wait()
        if isinstance(task.outcome, MCPError):
            raise task.outcome
        assert task.outcome is not None
        result = task.outcome.model_dump(by_alias=True, mode="json", exclude_none=True)
        # As the spec has it: the result names its task.
        related = {"io.modelcontextprotocol/related-task": {"taskId": task.id}}
        result["_meta"] = {**result.get("_meta", {}), **related}
        return result

    async def _cancel(self, _ctx: Context, params: types.CancelTaskRequestParams) -> dict[str, Any]:
        task = self._find(params.task_id)
        task.change("cancelled", "cancelled by the client")
        self.cancelled.append(task.id)
        self.cancel_seen.set()
        return task.wire()
