"""A server's task-only tool (`execution.taskSupport: "required"`) offered and called as a plain
tool: the node makes the task, follows it, and gives its result (in-process server)."""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.servers.inprocess import CrashableTransport, text_result
from tests.servers.task_server import TaskServer
from toolkits.base import CallContext
from toolkits.errors import ToolTimeout
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.observation import result_text

pytestmark = pytest.mark.anyio

Progress = tuple[float, float | None, str | None]


def config(**keys: Any) -> McpServerConfig:
    # The command is never run: the node gets the in-process server as its target.
    return McpServerConfig(command="in-process", protocol="legacy", **keys)


class Heard:
    """The progress a call reports, and an event for the next report."""

    def __init__(self) -> None:
        self.seen: list[Progress] = []
        self.next = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, total, message))
        self.next.set()
        self.next = anyio.Event()


async def test_a_task_only_tool_is_offered_as_a_plain_tool_without_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = TaskServer()
    async with McpToolkit("t", config(), target=tasks.server) as node:
        (tool,) = await node.list_tools()
    assert tool.name == "t__later"
    assert tool.definition is not None
    assert tool.definition.execution is None  # served on, it is a plain call: the node tasks
    assert "task" not in caplog.text


async def test_a_call_runs_the_task_reports_its_statuses_and_returns_its_result() -> None:
    tasks = TaskServer()
    heard = Heard()
    async with McpToolkit("t", config(), target=tasks.server) as node:
        result: list[types.CallToolResult] = []

        async def call() -> None:
            context = CallContext(on_progress=heard)
            result.append(await node.call_tool("t__later", {"n": 1}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await heard.next.wait()  # the task's first status
                tasks.move("working", "halfway")
                await heard.next.wait()
                tasks.finish(text_result("done"))
    assert [task.arguments for task in tasks.tasks] == [{"n": 1}]
    assert heard.seen == [(1, None, "started"), (2, None, "halfway")]
    assert result_text(result[0]) == "done"
    assert not result[0].is_error
    assert result[0].meta is None  # its caller made no task: none is named to it
    assert tasks.cancelled == []


async def test_the_servers_status_notifications_are_told_at_once_each_once_none_older() -> None:
    """Its poll interval (a minute) finds none of these in time: the server's own word of each
    (`notifications/tasks/status`, which the SDK drops) tells it at once. Said twice, or after
    a newer one (by `lastUpdatedAt`; a poll's answer may come so too), it is told once."""
    tasks = TaskServer(poll_interval=60_000)
    piped = CrashableTransport(tasks.server)  # messages on a transport, as a real server's
    heard = Heard()
    async with McpToolkit("t", config(timeout=600), target=piped.connect) as node:
        result: list[types.CallToolResult] = []

        async def call() -> None:
            context = CallContext(on_progress=heard)
            result.append(await node.call_tool("t__later", {}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await heard.next.wait()  # as created
                await tasks.tell("working", "reading")
                await heard.next.wait()
                reading = tasks.tasks[-1].wire()
                await tasks.tell("input_required", "asking")
                await heard.next.wait()
                await tasks.notify(reading)  # late: older than the last told
                await tasks.notify(tasks.tasks[-1].wire())  # again
                await tasks.tell("working", "writing")
                await heard.next.wait()
                tasks.finish(text_result("done").model_copy(update={"meta": {"note": "kept"}}))
    assert [message for _, _, message in heard.seen] == ["started", "reading", "asking", "writing"]
    assert [progress for progress, _, _ in heard.seen] == [1, 2, 3, 4]
    assert result_text(result[0]) == "done"
    assert result[0].meta == {"note": "kept"}  # the server's own, its task's id left out


async def test_two_statuses_updated_at_the_same_time_are_both_told_once() -> None:
    """A server may change a task twice within its clock's tick (server-everything goes from
    working to input_required in one millisecond): the second is news all the same, and
    either said again at that time (a poll's answer, a repeated notification) is not."""
    tasks = TaskServer(poll_interval=60_000)
    piped = CrashableTransport(tasks.server)
    heard = Heard()
    async with McpToolkit("t", config(timeout=600), target=piped.connect) as node:
        result: list[types.CallToolResult] = []

        async def call() -> None:
            context = CallContext(on_progress=heard)
            result.append(await node.call_tool("t__later", {}, context=context))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                await heard.next.wait()  # as created
                await tasks.tell("working", "synthesizing")
                await heard.next.wait()
                synthesizing = tasks.tasks[-1].wire()
                await tasks.tell("input_required", "asking", later=False)
                await heard.next.wait()
                asking = tasks.tasks[-1].wire()
                assert asking["lastUpdatedAt"] == synthesizing["lastUpdatedAt"]
                await tasks.notify(synthesizing)  # as old as the last told, and told already
                await tasks.notify(tasks.tasks[-1].wire())  # again
                await tasks.tell("working", "writing")
                await heard.next.wait()
                tasks.finish(text_result("done"))
    assert [message for _, _, message in heard.seen] == [
        "started",
        "synthesizing",
        "asking",
        "writing",
    ]
    assert result_text(result[0]) == "done"


async def test_a_task_that_fails_is_the_calls_error_result() -> None:
    tasks = TaskServer()
    results: list[types.CallToolResult] = []
    async with McpToolkit("t", config(), target=tasks.server) as node:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await node.call_tool("t__later", {}))

                tg.start_soon(call)
                await tasks.created.wait()
                tasks.finish(MCPError(types.INTERNAL_ERROR, "the disk is full"))
    (result,) = results
    assert result.is_error
    assert result_text(result) == "MCP error -32603: the disk is full"


async def test_a_task_the_server_refuses_to_create_is_the_calls_error_result() -> None:
    tasks = TaskServer()
    tasks.refusal = "topic: expected a string"
    async with McpToolkit("t", config(), target=tasks.server) as node:
        with anyio.fail_after(10):
            result = await node.call_tool("t__later", {"topic": 5})
    assert result.is_error
    assert result_text(result) == "MCP error -32602: topic: expected a string"
    assert tasks.tasks == []


async def test_a_cancelled_call_cancels_its_task() -> None:
    tasks = TaskServer()
    async with McpToolkit("t", config(), target=tasks.server) as node:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(node.call_tool, "t__later", dict[str, Any]())
                await tasks.created.wait()
                tg.cancel_scope.cancel()
            await tasks.cancel_seen.wait()
    assert tasks.cancelled == ["task-1"]


async def test_a_task_whose_status_stays_the_same_times_out_and_is_cancelled() -> None:
    tasks = TaskServer()
    async with McpToolkit("t", config(timeout=0.5), target=tasks.server) as node:
        with (
            anyio.fail_after(10),
            pytest.raises(ToolTimeout, match=r"no result or progress for 0\.5 s"),
        ):
            await node.call_tool("t__later", {})
    assert tasks.cancelled == ["task-1"]


async def test_a_progress_callback_that_raises_does_not_fail_the_call(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tasks = TaskServer()
    told = anyio.Event()

    async def broken(progress: float, total: float | None, message: str | None) -> None:
        told.set()
        raise ValueError("the caller's bug")

    results: list[types.CallToolResult] = []
    async with McpToolkit("t", config(), target=tasks.server) as node:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    context = CallContext(on_progress=broken)
                    results.append(await node.call_tool("t__later", {}, context=context))

                tg.start_soon(call)
                await told.wait()
                tasks.finish(text_result("done anyway"))
    assert result_text(results[0]) == "done anyway"
    assert "progress callback raised" in caplog.text
