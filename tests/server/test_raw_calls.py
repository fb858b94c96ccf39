"""A node's own calls (an agent's, the usual path's) go as raw JSON-RPC on its live connection
(`McpToolkit.raw_calls`) and answer exactly as through the SDK client: every result shape,
errors, progress, log messages, and the server's questions answered, refused or not asked,
over both node eras on HTTP and a handshake-era stdio pipe."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from pydantic import FileUrl

from tests.servers.asgi import serve_on_loopback
from toolkits import CallContext, ToolTimeout
from toolkits.mcp import McpServerConfig, McpToolkit, node
from toolkits.mcp.config import ProtocolMode
from toolkits.mcp.server_requests import NOT_FOR_A_CLIENT

from .test_pass_through import Downstream, _results_of_every_shape  # pyright: ignore[reportPrivateUsage]

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("d__echo", {"message": "héllo ✓"}),
    ("d__fail", {}),
    ("d__echo", {}),  # the server refuses the arguments
    ("d__big", {"n": 200_000}),
    ("d__steps", {"n": 3}),
    ("d__ask", {}),
    ("d__greet", {}),
    ("d__sample", {}),
    ("d__declared", {}),
]
PIPED = Path(__file__).parents[1] / "servers" / "piped.py"
SHAPES = ["d__plain", "d__nulled", "d__kinds", "d__unstructured"]


class Caller:
    """A caller that hears everything and answers the server's questions (or none)."""

    def __init__(self, *, answers: bool, answerable: Mapping[str, Any] | None = None) -> None:
        self.heard: list[tuple[Any, ...]] = []
        self.context = CallContext(
            on_progress=self.progress,
            on_log=self.log,
            answer=self.answer if answers else None,
            answerable=answerable,
        )

    async def progress(self, done: float, total: float | None, message: str | None) -> None:
        self.heard.append(("progress", done, total, message))

    async def log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.heard.append(("log", params.level, params.data))

    async def answer(self, request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        self.heard.append(("asked", request.method))
        if isinstance(request, types.ElicitRequest):
            return types.ElicitResult(action="accept", content={"name": "Ada"})
        if isinstance(request, types.CreateMessageRequest):
            text = types.TextContent(text="42")
            return types.CreateMessageResult(role="assistant", content=text, model="m")
        root = types.Root(uri=FileUrl("file:///work"), name="work")
        return types.ListRootsResult(roots=[root])


CALLERS = {
    "answers all": lambda: Caller(answers=True),
    "answers elicitation": lambda: Caller(answers=True, answerable={"elicitation": {"form": {}}}),
    "answers none": lambda: Caller(answers=False),
}


async def _calls(
    toolkit: McpToolkit,
    calls: list[tuple[str, dict[str, Any]]],
    raw: bool,
    caplog: pytest.LogCaptureFixture,
) -> list[tuple[Any, ...]]:
    """Each caller's calls: who, the tool, the result, what the caller heard; and last, what
    the node wrote to its log of the server's log messages meanwhile."""
    toolkit.raw_calls = raw
    caplog.clear()
    made: list[tuple[Any, ...]] = []
    for who, caller_of in CALLERS.items():
        for name, arguments in calls:
            caller = caller_of()
            result = await toolkit.call_tool(name, arguments, context=caller.context)
            made.append((who, name, result.model_dump(by_alias=True), caller.heard))
    written = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.d"]
    made.append(("the node's log", [line for line in written if line.startswith("server log")]))
    return made


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the calls that went as raw JSON-RPC."""
    raw: list[str] = []
    call_for = node.call_for

    async def counting(forward: Any, *args: Any) -> types.CallToolResult | None:
        raw.append(forward.tool)
        return await call_for(forward, *args)

    monkeypatch.setattr(node, "call_for", counting)
    return raw


@asynccontextmanager
async def http_node(app: Any, protocol: ProtocolMode) -> AsyncGenerator[McpToolkit]:
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=protocol)
        async with McpToolkit("d", config) as toolkit:
            yield toolkit


@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_calls_over_http_answer_as_through_the_sdk_client(
    protocol: ProtocolMode, counted: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.d")
    with anyio.fail_after(60):
        async with http_node(Downstream().app(), protocol) as toolkit:
            raw = await _calls(toolkit, CALLS, raw=True, caplog=caplog)
            usual = await _calls(toolkit, CALLS, raw=False, caplog=caplog)
        async with http_node(_results_of_every_shape().server.streamable_http_app(), protocol) as (
            toolkit
        ):
            shapes: list[tuple[str, dict[str, Any]]] = [(name, {}) for name in SHAPES]
            raw_shapes = await _calls(toolkit, shapes, raw=True, caplog=caplog)
            usual_shapes = await _calls(toolkit, shapes, raw=False, caplog=caplog)
    assert raw == usual
    assert raw_shapes == usual_shapes
    assert len(counted) == len(raw) + len(raw_shapes) - 2  # every one went raw, none twice
    *raw, (_, logged) = raw
    assert (
        logged
        == ["server log: step 1 of 3", "server log: step 2 of 3", "server log: step 3 of 3"] * 3
    )
    results = {(who, name): (result, heard) for who, name, result, heard in raw}
    steps, heard = results["answers none", "d__steps"]
    assert steps["content"][0]["text"] == "3 steps"
    assert [h for h in heard if h[0] == "progress"] == [
        ("progress", 1.0, 3.0, "step 1"),
        ("progress", 2.0, 3.0, "step 2"),
        ("progress", 3.0, 3.0, "step 3"),
    ]

    def text(who: str, name: str) -> str:
        return results[who, name][0]["content"][0]["text"]

    if protocol == "auto":  # asked mid-call, on the call's own stream
        assert text("answers all", "d__ask") == "user is Ada"
        assert text("answers all", "d__sample") == "m says 42"
        assert NOT_FOR_A_CLIENT in text("answers none", "d__ask")
    else:  # asked in input-required rounds; declared per call: what the caller answers
        assert text("answers all", "d__greet") == "hello Ada"
        assert {who: text(who, "d__declared") for who in CALLERS} == {
            "answers all": "sampling,elicitation,roots",
            "answers elicitation": "elicitation",
            "answers none": "none",
        }


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_calls_over_a_pipe_answer_as_through_the_sdk_client(
    protocol: ProtocolMode, counted: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.d")
    calls = [call for call in CALLS if call[0] not in ("d__greet", "d__sample", "d__declared")]
    with anyio.fail_after(60):
        config = McpServerConfig(command=sys.executable, args=[str(PIPED)], protocol=protocol)
        async with McpToolkit("d", config) as toolkit:
            assert toolkit.health.protocol_version == (
                "2026-07-28" if protocol == "modern" else "2025-11-25"
            )
            raw = await _calls(toolkit, calls, raw=True, caplog=caplog)
            usual = await _calls(toolkit, calls, raw=False, caplog=caplog)
    assert raw == usual
    assert len(counted) == len(raw) - 1
    *raw, (_, logged) = raw
    assert len(logged) == 9  # each of the three callers' steps(3), once
    results = {(who, name): result for who, name, result, _ in raw}
    asked = results["answers all", "d__ask"]["content"][0]["text"]
    # 2026-07-28 has no questions mid-call: a server written the usual way cannot ask.
    assert asked == "user is Ada" if protocol == "legacy" else asked.startswith("could not ask")


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_a_tool_given_its_own_timeout_outlasts_the_servers_over_a_pipe(
    protocol: ProtocolMode, counted: list[str]
) -> None:
    # `slow` waits for `release`, silent after its first progress; `wait`, called after it,
    # is still held to the server's 0.5 s, by whose end `slow` has been silent longer.
    config = McpServerConfig(
        command=sys.executable,
        args=[str(PIPED)],
        protocol=protocol,
        timeout=0.5,
        connect_timeout=30,  # a Python process starting
        tool_timeouts={"slow": 30},
    )
    waiting = anyio.Event()

    async def on_progress(_done: float, _total: float | None, _message: str | None) -> None:
        waiting.set()

    slow: list[types.CallToolResult] = []
    with anyio.fail_after(60):
        async with McpToolkit("d", config) as toolkit:

            async def call_slow() -> None:
                context = CallContext(on_progress=on_progress)
                slow.append(await toolkit.call_tool("d__slow", {}, context=context))

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_slow)
                await waiting.wait()
                with pytest.raises(ToolTimeout, match=r"no result or progress for 0\.5 s") as hung:
                    await toolkit.call_tool("d__wait", {})
                assert hung.value.seconds == 0.5
                await toolkit.call_tool("d__release", {})
    assert [result.content for result in slow] == [[types.TextContent(text="released")]]
    assert counted == ["d__slow", "d__wait", "d__release"]  # each as raw JSON-RPC
