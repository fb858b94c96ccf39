"""Proxied calls passed straight through a stdio server's pipe answer as the usual path does.

Real subprocess servers over stdio (`tests/servers/piped.py`, and server-everything), two
gateways in front of each over real HTTP, one with the pass-through and one without, and
2026-07-28 SDK clients. The pipe is shared by the calls passed through and the node's SDK
session (handshake, listings, calls on the usual path, the server's own requests and
notifications): both go on at the same time. A server that dies, hangs, or is told a call was
cancelled is covered too.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.servers.real import everything_stdio
from toolkits import CallContext
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.mcp.server_requests import refusal
from toolkits.observation import result_text

from .proxying import ClientAnswers, answers_by_name, waiting_notice
from .proxying import gateway_front as front
from .support import ERAS

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

PIPED = Path(__file__).parents[1] / "servers" / "piped.py"


def piped(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[str(PIPED)], **keys)


class Heard:
    def __init__(self) -> None:
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.logs: list[str] = []
        self.first_progress = anyio.Event()

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))
        self.first_progress.set()

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(f"{params.level}: {params.data}")


Calls = Sequence[tuple[str, dict[str, Any]]]


async def _answers(
    url: str, calls: Calls, mode: Literal["auto", "legacy"]
) -> tuple[list[tuple[Any, ...]], list[str]]:
    answers: list[tuple[Any, ...]] = []
    logs = Heard()
    async with Client(url, mode=mode, logging_callback=logs.on_log, log_level="info") as client:
        await client.list_tools()
        for name, arguments in calls:
            heard = Heard()
            result = await client.call_tool(name, arguments, progress_callback=heard.on_progress)
            answers.append(
                (name, result.model_dump(by_alias=True, exclude_none=True), heard.progress)
            )
    return answers, logs.logs


async def _both_ways(
    config: McpServerConfig,
    calls: Calls,
    *,
    unknown: int = 0,
    mode: Literal["auto", "legacy"] = "auto",
) -> tuple[tuple[list[tuple[Any, ...]], list[str]], ...]:
    """The answers with the pass-through and without, to a client of `mode`'s era; every call
    but the `unknown` tools' passed through."""
    async with front(config) as (url, layer, _):
        fast = await _answers(url, calls, mode)
        assert layer is not None
        assert layer.forwarded == len(calls) - unknown
    async with front(config, pass_through=False) as (url, layer, _):
        assert layer is None
        usual = await _answers(url, calls, mode)
    return fast, usual


PIPED_CALLS: Calls = [
    ("d__echo", {"message": "héllo ✓"}),
    ("d__fail", {}),
    ("d__echo", {}),  # the server refuses the arguments
    ("d__big", {"n": 5_000_000}),  # many times a pipe's buffer
    ("d__steps", {"n": 3}),
    ("d__ask", {}),
]


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("node_protocol", ["auto", "modern"])
async def test_calls_passed_through_a_pipe_answer_as_the_usual_path_does(
    mode: Literal["auto", "legacy"], node_protocol: Literal["auto", "modern"]
) -> None:
    # `d__big`'s answer, over the SDK client's 1 MiB cap on an event, is JSON on either path.
    with anyio.fail_after(60):
        fast, usual = await _both_ways(piped(protocol=node_protocol), PIPED_CALLS, mode=mode)
    assert fast == usual
    answers, logs = fast
    if node_protocol == "modern":  # a server written the usual way cannot ask mid-call then
        by_name = {name: (result, progress) for name, result, progress in answers}
        assert "could not ask" in str(by_name["d__ask"][0]["content"])
    else:
        by_name = answers_by_name(answers, logs)
    assert by_name["d__big"][0]["content"][0]["text"] == "x" * 5_000_000


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_that_can_be_asked_is_asked_through_the_pipe(mode: str) -> None:
    """The server asks on the pipe, where nothing says which call the question is for: the
    call passed through is held among the node's calls, which put it to its client (mid-call
    on a 2025-era session; in input-required rounds to a 2026-07-28 client, the call parked)."""
    asked: list[str] = []
    answers = ClientAnswers()
    with anyio.fail_after(60):
        for pass_through in (True, False):
            async with (
                front(piped(), pass_through=pass_through) as (url, layer, _),
                Client(url, mode=mode, **answers.callbacks()) as client,
            ):
                await client.list_tools()
                asked.append(result_text(await client.call_tool("d__ask", {})))
                assert (layer.forwarded if layer is not None else None) == (
                    1 if pass_through else None
                )
    assert asked == ["user is Ada", "user is Ada"]
    assert len(answers.elicited) == 2
    assert answers.elicited[0] == answers.elicited[1]


async def test_every_log_message_of_a_call_reaches_its_caller_before_its_result() -> None:
    # Log messages go to the node's SDK session, the result straight to the call: the result
    # must wait until the session has attributed what came before it.
    heard: list[int] = []
    with anyio.fail_after(60):
        async with front(piped()) as (url, layer, _):
            logs = Heard()
            async with Client(url, logging_callback=logs.on_log, log_level="info") as client:
                await client.list_tools()
                for _ in range(30):
                    logs.logs.clear()
                    await client.call_tool("d__steps", {"n": 4})
                    heard.append(len(logs.logs))
    assert heard == [4] * 30
    assert layer is not None
    assert layer.forwarded == 30


async def test_a_sessions_log_messages_reach_it_while_another_of_its_calls_waits() -> None:
    # Over stdio a log message says not which call it is for: with calls of one client in
    # flight it goes to that client's latest, as on the usual path; with calls of several
    # clients it would be dropped.
    with anyio.fail_after(60):
        async with front(piped()) as (url, layer, _):
            assert layer is not None
            logs = Heard()
            async with Client(
                url, mode="legacy", logging_callback=logs.on_log, log_level="info"
            ) as client:
                await client.list_tools()
                waiting = Heard()

                async def wait() -> None:
                    await client.call_tool("d__wait", {}, progress_callback=waiting.on_progress)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await waiting.first_progress.wait()  # in flight at the server
                    before = layer.forwarded
                    result = await client.call_tool("d__steps", {"n": 3})
                    assert layer.forwarded == before + 1
                    assert result_text(result) == "3 steps"
                    tg.cancel_scope.cancel()
    assert logs.logs == ["info: step 1 of 3", "info: step 2 of 3", "info: step 3 of 3"]


EVERYTHING_CALLS: Calls = [
    ("d__echo", {"message": "héllo ✓"}),
    ("d__get-sum", {"a": 2, "b": 40}),
    ("d__get-structured-content", {"location": "New York"}),
    ("d__get-annotated-message", {"messageType": "error", "includeImage": True}),
    ("d__get-tiny-image", {}),
    ("d__trigger-long-running-operation", {"duration": 0.3, "steps": 3}),
    ("d__trigger-sampling-request", {"prompt": "hi", "maxTokens": 5}),
    ("d__no-such-tool", {}),
]


async def test_server_everything_over_stdio_answers_as_on_the_usual_path() -> None:
    config = everything_stdio(protocol="auto", connect_timeout=30)
    with anyio.fail_after(90):
        fast, usual = await _both_ways(config, EVERYTHING_CALLS, unknown=1)
    assert fast == usual
    by_name = {name: (result, progress) for name, result, progress in fast[0]}
    assert len(by_name["d__trigger-long-running-operation"][1]) == 3
    assert "sampling" in str(by_name["d__trigger-sampling-request"][0]["content"])


async def test_concurrent_calls_share_the_pipe_with_the_sdk_sessions_traffic() -> None:
    grown = anyio.Event()
    with anyio.fail_after(60):
        async with front(piped()) as (url, layer, node):

            async def on_tools_changed(_node: str) -> None:
                if any(tool.name == "d__grown" for tool in await node.list_tools()):
                    grown.set()

            node.subscribe(on_tools_changed)
            failures: list[str] = []

            async def client_calls(who: int) -> None:
                async with Client(url) as client:
                    await client.list_tools()
                    async with anyio.create_task_group() as tg:
                        for n in range(10):
                            tg.start_soon(one_call, client, who, n)

            async def one_call(client: Client, who: int, n: int) -> None:
                heard = Heard()
                if n % 2:
                    result = await client.call_tool("d__echo", {"message": f"{who}/{n}"})
                    expected = f"{who}/{n}"
                else:
                    steps = n + 2
                    result = await client.call_tool(
                        "d__steps", {"n": steps}, progress_callback=heard.on_progress
                    )
                    expected = f"{steps} steps"
                    # A call that waits for a slot first hears so ("waiting for ...", 0).
                    said = [p for p, _, m in heard.progress if not waiting_notice(m)]
                    if said != [float(i) for i in range(1, steps + 1)]:
                        failures.append(f"{who}/{n}: progress {heard.progress}")
                if result.content != [types.TextContent(text=expected)]:
                    failures.append(f"{who}/{n}: {result.content}")

            async def usual_path_traffic() -> None:
                for _ in range(5):  # listings and calls of the node's own SDK session
                    await node.refresh_tools()
                    echo = await node.call_tool("d__echo", {"message": "sdk"})
                    if result_text(echo) != "sdk":
                        failures.append(f"usual path: {echo}")

            async def grow_a_tool() -> None:
                async with Client(url) as client:
                    await client.list_tools()
                    grew = await client.call_tool("d__grow", {})  # list_changed on the pipe
                    await grown.wait()
                    after = await client.call_tool("d__grown", {})
                if grew.content != [types.TextContent(text="grew")]:
                    failures.append(f"grow: {grew.content}")
                if after.content != [types.TextContent(text="grown")]:
                    failures.append(f"grown: {after.content}")

            async with anyio.create_task_group() as tg:
                for who in range(3):
                    tg.start_soon(client_calls, who)
                tg.start_soon(usual_path_traffic)
                tg.start_soon(grow_a_tool)
    assert failures == []
    assert layer is not None
    # `d__grown` too, once the gateway's own listing has it (it may hear of it after us).
    assert layer.forwarded >= 3 * 10 + 1


async def test_a_server_that_dies_mid_call_fails_the_call_and_is_started_again() -> None:
    with anyio.fail_after(60):
        async with front(piped()) as (url, layer, node), Client(url) as client:
            await client.list_tools()
            died = await client.call_tool("d__die", {})
            after = await client.call_tool("d__echo", {"message": "back"})
            assert node.health.state == "ready"
    assert died.is_error
    assert died.content == [
        types.TextContent(
            text="tool 'd__die' (node 'd') failed: MCP server 'd' went away: the connection "
            "closed during a call to 'd__die'; it exited with status 3; reconnecting"
        )
    ]
    assert after.content == [types.TextContent(text="back")]
    assert layer is not None
    assert layer.forwarded >= 1  # the next call, too, unless it came before the reconnection


async def test_a_hung_call_times_out_and_is_cancelled_at_the_server() -> None:
    with anyio.fail_after(60):
        async with (
            front(piped(timeout=0.5, connect_timeout=30)) as (url, layer, _),
            Client(url) as client,
        ):
            await client.list_tools()
            result = await client.call_tool("d__wait", {})
            seen = await client.call_tool("d__cancelled", {})  # the session survived, too
    assert result.content == [
        types.TextContent(
            text="tool 'd__wait' (node 'd') failed: tool 'd__wait' of MCP server 'd' timed out "
            "(no result or progress for 0.5 s); the call was cancelled"
        )
    ]
    assert seen.content == [types.TextContent(text="a wait was cancelled")]
    assert layer is not None
    assert layer.forwarded == 2


async def test_a_call_the_client_cancels_is_cancelled_at_the_server() -> None:
    with anyio.fail_after(60):
        async with front(piped()) as (url, layer, _), Client(url) as client:
            await client.list_tools()
            heard = Heard()

            async def wait() -> None:
                await client.call_tool("d__wait", {}, progress_callback=heard.on_progress)

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await heard.first_progress.wait()  # the server is in the call
                tg.cancel_scope.cancel()
            seen = await client.call_tool("d__cancelled", {})
    assert heard.progress == [(0.0, None, "waiting")]
    assert seen.content == [types.TextContent(text="a wait was cancelled")]
    assert layer is not None
    assert layer.forwarded == 1  # the cancelled call was never answered


async def test_a_node_call_on_the_usual_path_hears_the_same_pipe() -> None:
    heard = Heard()
    with anyio.fail_after(30):
        async with McpToolkit("d", piped()) as node:
            forward = node.forward("d__echo")
            assert forward is not None
            result = await forward.call(
                {"message": "raw"},
                meta={},
                on_progress=heard.on_progress,
                on_log=_ignore,
                answer=_nobody,
            )
            steps = await node.call_tool(
                "d__steps", {"n": 2}, context=CallContext(on_progress=heard.on_progress)
            )
    assert result is not None
    assert result["content"] == [{"type": "text", "text": "raw"}]
    assert result_text(steps) == "2 steps"
    assert heard.progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


async def test_a_call_on_a_pipe_already_closed_is_left_to_the_usual_path() -> None:
    with anyio.fail_after(30):
        async with McpToolkit("d", piped()) as node:
            forward = node.forward("d__echo")
            assert forward is not None
            pid = int(result_text(await node.call_tool("d__pid", {})))
            os.kill(pid, signal.SIGKILL)
            await node.wait_for_health(lambda health: health.state != "ready")
            result = await forward.call(
                {"message": "raw"},
                meta={},
                on_progress=_no_progress,
                on_log=_ignore,
                answer=_nobody,
            )
            echo = await node.call_tool("d__echo", {"message": "usual"})  # after reconnecting
    assert result is None  # never sent: the usual path may take the call
    assert result_text(echo) == "usual"


async def _no_progress(_progress: float, _total: float | None, _message: str | None) -> None:
    pass


async def _ignore(_params: dict[str, Any]) -> None:
    pass


async def _nobody(request: types.InputRequest) -> types.ErrorData:
    return refusal(request, "nobody to ask")
