"""Agent calls as MCP tasks (2025-11-25) on `serve --http --store`: the task is the durable
run, so it reports `input_required` while a call waits for approval, survives a kill -9 of
its gateway (a new process on the same store reports and finishes it, no finished call run
again), and can be cancelled. Real processes over real HTTP on 127.0.0.1.

The SDK's client validates a `tools/call` result as a `CallToolResult`, so the task-creating
call is sent as plain JSON-RPC over HTTP; everything else goes through the SDK's `Client`.
"""

from __future__ import annotations

import json
import re
import signal
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.shared.exceptions import MCPError

from .processes import http_server
from .support import ProgressLog
from .test_served_approval import Person

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
)
LEGACY = "2025-11-25"


def _config(directory: Path, answers: list[dict[str, Any]]) -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps(answers))
    config = directory / "agent-gateway.toml"
    config.write_text(
        TOOLS + f'[agents.assistant]\nmodel = "scripted:{script}"\n'
        'tools = ["logged", "guarded"]\nrequire_approval = ["guarded"]\n'
    )
    return config


def _call(tool: str, call_id: str, **arguments: str) -> dict[str, Any]:
    return {"name": tool, "id": call_id, "arguments": arguments}


Post = Callable[[dict[str, Any]], Awaitable[dict[str, Any] | None]]


@asynccontextmanager
async def _legacy_session(url: str) -> AsyncGenerator[Post]:
    """A 2025-11-25 session in plain JSON-RPC over HTTP: posts a message, and gives the
    answer to it (None for a notification)."""
    headers = {"Accept": "application/json, text/event-stream"}
    async with httpx2.AsyncClient(timeout=30) as http:

        async def post(message: dict[str, Any]) -> dict[str, Any] | None:
            response = await http.post(url, json=message, headers=headers)
            assert response.status_code in (200, 202), response.text
            if "mcp-session-id" in response.headers:
                headers["Mcp-Session-Id"] = response.headers["mcp-session-id"]
            for line in response.text.splitlines():
                if line.startswith("data:") or line.startswith("{"):
                    found = json.loads(line.removeprefix("data:"))
                    if found.get("id") == message.get("id"):
                        return found
            return None

        hello = {
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        }
        initialized = await post(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
        )
        assert initialized is not None
        assert "tasks" in initialized["result"]["capabilities"], initialized
        headers["Mcp-Protocol-Version"] = LEGACY
        await post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield post


async def _task_of(post: Post, arguments: dict[str, Any]) -> dict[str, Any]:
    """A 2025-11-25 `tools/call` of the agent asking for a task: its `CreateTaskResult`."""
    params = {"name": "assistant", "arguments": arguments, "task": {"ttl": 60000}}
    created = await post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params})
    assert created is not None
    return created["result"]


async def _create_task(url: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with _legacy_session(url) as post:
        return await _task_of(post, arguments)


async def _task(client: Client, task_id: str) -> types.GetTaskResult:
    request = types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id))
    return await client.session.send_request(request, types.GetTaskResult)


async def _until(client: Client, task_id: str, status: str) -> types.GetTaskResult:
    """Polls tasks/get (each poll a round trip) until the task has `status`."""
    with anyio.fail_after(30):
        while (task := await _task(client, task_id)).status != status:
            assert task.status in ("working", "input_required"), task
        return task


async def _result(client: Client, task_id: str) -> types.CallToolResult:
    request = types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id))
    with anyio.fail_after(30):
        return await client.session.send_request(request, types.CallToolResult)


async def test_a_task_waits_for_approval_and_survives_a_restart_of_its_gateway(
    tmp_path: Path,
) -> None:
    log = tmp_path / "calls.log"
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    both = [
        _call("logged", "a", log=str(log), name="A"),
        _call("guarded", "b", log=str(log), name="B"),
    ]
    config = _config(tmp_path, [{"tool_calls": both}, {"content": "A and B are done"}])
    async with http_server(config, "--store", store) as first:
        created = await _create_task(first.url, {"prompt": "go"})
        task_id = created["task"]["taskId"]
        assert created["task"]["status"] == "working"
        assert created["task"]["ttl"] == 30 * 86_400_000  # [store] keep_days, by default 30
        async with Client(first.url, mode="legacy") as client:
            assert client.server_capabilities.tasks is not None
            waiting = await _until(client, task_id, "input_required")
            assert waiting.status_message is not None
            assert "b (guarded)" in waiting.status_message
        assert log.read_text().splitlines() == ["start A", "end A"]
        async with Client(first.url) as modern:  # 2026-07-28: tasks are not offered there
            assert modern.server_capabilities.tasks is None
        first.process.send_signal(signal.SIGKILL)
        assert await first.process.wait() == -signal.SIGKILL

    # The model's first answer is recorded in the store: the new process is asked once more.
    _config(tmp_path, [{"content": "A and B are done"}])
    async with (
        http_server(config, "--store", store) as second,
        Client(second.url, mode="legacy") as client,
    ):
        await _until(client, task_id, "input_required")  # taken over, waiting again
        approved = await client.call_tool("approve_run", {"run_id": task_id, "call": "b"})
        assert approved.content == [types.TextContent(text="A and B are done")]
        result = await _result(client, task_id)
        assert result.content == [types.TextContent(text="A and B are done")]
        assert result.meta is not None
        # The run's usage, as a tools/call answer of the agent carries it (`reported_usage`).
        assert set(result.meta) == {"io.modelcontextprotocol/related-task", "agent-gateway/usage"}
        assert result.meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
        assert (await _task(client, task_id)).status == "completed"
        listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert [t.task_id for t in listed.tasks] == [task_id]
    # A had finished before the kill: not run again; B ran once, after the approval.
    assert log.read_text().splitlines() == ["start A", "end A", "start B", "end B"]


async def test_tasks_list_and_get_see_only_the_runs_started_as_tasks(tmp_path: Path) -> None:
    config = _config(tmp_path, [{"content": "plain"}, {"content": "as a task"}])
    progress = ProgressLog()
    async with http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served:
        async with Client(served.url, mode="legacy") as client:
            plain = await client.call_tool(
                "assistant", {"prompt": "go"}, progress_callback=progress
            )
        assert plain.content == [types.TextContent(text="plain")]
        started = re.fullmatch(r"agent assistant: started \(run (\w+)\)", progress.messages[0])
        assert started is not None, progress.messages
        task_id = (await _create_task(served.url, {"prompt": "go"}))["task"]["taskId"]
        async with Client(served.url, mode="legacy") as client:
            await _until(client, task_id, "completed")
            listed = await client.session.send_request(
                types.ListTasksRequest(), types.ListTasksResult
            )
            with pytest.raises(MCPError, match="no task"):
                await _task(client, started.group(1))  # a stored run, but no task
    assert [t.task_id for t in listed.tasks] == [task_id]


async def test_tasks_cancel_cancels_the_run(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    hold = tmp_path / "hold"
    hold.touch()
    held = [_call("logged", "h", log=str(log), name="H", hold=str(hold))]
    config = _config(tmp_path, [{"tool_calls": held}, {"content": "never"}])
    async with http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served:
        task_id = (await _create_task(served.url, {"prompt": "go"}))["task"]["taskId"]
        async with Client(served.url, mode="legacy") as client:
            with anyio.fail_after(30):
                await served.line_starting("logged: holding H")  # its tool call runs
            assert (await _task(client, task_id)).status == "working"
            request = types.CancelTaskRequest(params=types.CancelTaskRequestParams(task_id=task_id))
            cancelled = await client.session.send_request(request, types.CancelTaskResult)
            assert cancelled.status == "cancelled"
            assert (await _task(client, task_id)).status == "cancelled"
            result = await _result(client, task_id)
            assert result.is_error
    assert log.read_text().splitlines() == ["start H"]


async def test_a_task_whose_model_failed_says_its_run_stopped_and_can_be_resumed(
    tmp_path: Path,
) -> None:
    config = _config(tmp_path, [])  # the model has no answer: a model error, not the question's
    async with http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served:
        task_id = (await _create_task(served.url, {"prompt": "go"}))["task"]["taskId"]
        async with Client(served.url, mode="legacy") as client:
            task = await _until(client, task_id, "failed")
            result = await _result(client, task_id)
        await served.line_starting(f"WARNING gateway.server.served.run_failures: run {task_id}")
    assert task.status_message is not None
    assert "has 0 answers and was asked for answer 1" in task.status_message
    [text] = result.content
    assert isinstance(text, types.TextContent)
    assert text.text.startswith("agent 'assistant' stopped: ")
    assert text.text.endswith(
        f"Run {task_id} is stored where it stopped: the gateway's operator can continue it "
        f"(agent-gateway runs resume {task_id}); or call again (a new run) once the cause is gone."
    )
    assert str(tmp_path) not in text.text


async def test_a_task_that_cannot_begin_is_an_error_result_of_the_sessions_era(
    tmp_path: Path,
) -> None:
    """Bad arguments: an error result as the 2025-11-25 session has every other (no
    2026-07-28 `resultType`)."""
    config = _config(tmp_path, [{"content": "never"}])
    async with http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served:
        refused = await _create_task(served.url, {"prompt": ""})
    assert refused == {
        "content": [
            {
                "type": "text",
                "text": "invalid arguments for agent 'assistant': a prompt must not be empty",
            }
        ],
        "isError": True,
    }


async def test_tasks_result_asks_a_client_that_can_be_asked(tmp_path: Path) -> None:
    """The form is related to the task, as the spec wants of a request a task depends on."""
    log = tmp_path / "calls.log"
    gated = [_call("guarded", "b", log=str(log), name="B")]
    config = _config(tmp_path, [{"tool_calls": gated}, {"content": "B is done"}])
    person = Person(approve=True)
    metas: list[dict[str, Any]] = []

    async def shown(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        metas.append(dict(params.meta or {}))
        return await person(context, params)

    async with http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served:
        task_id = (await _create_task(served.url, {"prompt": "go"}))["task"]["taskId"]
        async with Client(served.url, mode="legacy", elicitation_callback=shown) as client:
            result = await _result(client, task_id)
    assert result.content == [types.TextContent(text="B is done")]
    assert len(person.asked) == 1
    assert "guarded" in person.asked[0]
    [meta] = metas
    assert meta["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
    assert meta["agent-gateway/approval"]["tool"] == "guarded"  # the call, as before
    assert log.read_text().splitlines() == ["start B", "end B"]


async def test_serve_deletes_the_runs_that_finished_longer_ago_than_keep_days(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    config = _config(tmp_path, [{"content": "done"}])
    async with http_server(config, "--store", store) as first:
        task_id = (await _create_task(first.url, {"prompt": "go"}))["task"]["taskId"]
        async with Client(first.url, mode="legacy") as client:
            await _until(client, task_id, "completed")

    # Kept a few microseconds: a server opening the store deletes the run, in its background
    # (it serves meanwhile).
    config.write_text(config.read_text() + "[store]\nkeep_days = 1e-10\n")
    async with (
        http_server(config, "--store", store, "-v") as second,
        Client(second.url, mode="legacy") as client,
    ):
        with anyio.fail_after(30):
            await second.line_starting("INFO gateway.durable.retention: deleted 1 finished run")
        listed = await client.session.send_request(types.ListTasksRequest(), types.ListTasksResult)
        assert listed.tasks == []
        with pytest.raises(MCPError, match=task_id):
            await _task(client, task_id)


async def test_tasks_result_is_shaped_as_a_2025_tools_call_result(tmp_path: Path) -> None:
    """No 2026-07-28 `resultType` in a 2025-11-25 session: the result as its `tools/call`
    would have been, with the related task."""
    config = _config(tmp_path, [{"content": "done"}])
    async with (
        http_server(config, "--store", f"sqlite:///{tmp_path / 'runs.sqlite'}") as served,
        _legacy_session(served.url) as post,
    ):
        task_id = (await _task_of(post, {"prompt": "go"}))["task"]["taskId"]
        params = {"taskId": task_id}
        with anyio.fail_after(30):
            answer = await post(
                {"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": params}
            )
    assert answer is not None
    result = answer["result"]
    assert "resultType" not in result
    assert result["content"] == [{"type": "text", "text": "done"}]
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": task_id}
