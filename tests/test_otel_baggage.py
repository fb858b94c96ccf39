"""A caller's W3C baggage goes on with its trace (SEP-414): the `_meta` of each tool call's
request carries the call's span as `traceparent` and the caller's `baggage` as it was sent."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp.client import Client
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from agent import ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.config import GatewaySettings
from gateway.server import build_server
from tests.test_otel import call, exporter
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
SENT = {
    "traceparent": f"00-{TRACE_ID}-b7ad6b7169203331-01",
    "tracestate": "k=v",
    "baggage": "user=alice,tenant=t1",
}


def downstream(seen: list[dict[str, Any]]) -> MCPServer:
    server = MCPServer("down")

    @server.tool()
    def whatmeta(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Keeps the request's `_meta`, as this server got it."""
        seen.append(dict(ctx.request_context.meta or {}))
        return "noted"

    return server


def parent_span_id(meta: dict[str, Any]) -> int:
    version, trace_id, span_id, _flags = meta["traceparent"].split("-")
    assert (version, trace_id) == ("00", TRACE_ID)
    return int(span_id, 16)


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_served_agents_tool_calls_carry_the_clients_baggage(era: str) -> None:
    hook, memory = exporter()
    model = ScriptedModel([call("d__whatmeta"), "done"])
    metas: list[dict[str, Any]] = []
    node = McpToolkit("d", McpServerConfig(command="in-process"), target=downstream(metas))
    with anyio.fail_after(30):
        async with node as d:
            gateway = Gateway([d], [AgentSpec("a", model, tools=["d"])], hooks=[hook])
            served, _router = build_server(gateway, GatewaySettings())
            async with Client(served, mode=era) as client:  # pyright: ignore[reportArgumentType]
                answer = await client.call_tool("a", {"prompt": "hi"}, meta=SENT)  # pyright: ignore[reportArgumentType]
    assert not answer.is_error
    [seen] = metas
    assert seen["baggage"] == SENT["baggage"]
    assert seen["tracestate"] == SENT["tracestate"]
    [tool] = [s for s in memory.get_finished_spans() if s.name == "execute_tool d__whatmeta"]
    assert tool.context is not None
    assert parent_span_id(seen) == tool.context.span_id  # our span, the client's trace


async def test_a_call_continuing_a_trace_sent_earlier_carries_its_baggage() -> None:
    """No request is being served (a run resumed in another process): the context the client
    sent with it is all there is."""
    hook, memory = exporter()
    metas: list[dict[str, Any]] = []
    node = McpToolkit("d", McpServerConfig(command="in-process"), target=downstream(metas))
    with anyio.fail_after(30):
        async with node as d:
            gateway = Gateway([d], [], hooks=[hook])
            result = await gateway.call_tool("d__whatmeta", {}, caller_trace=SENT)
    assert not result.is_error
    [seen] = metas
    assert seen["baggage"] == SENT["baggage"]
    [tool] = memory.get_finished_spans()
    assert tool.context is not None
    assert parent_span_id(seen) == tool.context.span_id


@pytest.mark.parametrize("era", ["auto", "legacy"])
@pytest.mark.parametrize("key", ["baggage", "tracestate", "traceparent"])
async def test_a_trace_key_that_is_no_string_is_ignored(era: str, key: str) -> None:
    """The SDK's reading of `_meta` failed on it: an internal error, a Python message."""
    metas: list[dict[str, Any]] = []
    node = McpToolkit("d", McpServerConfig(command="in-process"), target=downstream(metas))
    odd: dict[str, Any] = {**SENT, key: 7}
    with anyio.fail_after(30):
        async with node as d:
            model = ScriptedModel([call("d__whatmeta"), "done"])
            gateway = Gateway([d], [AgentSpec("a", model, tools=["d"])])
            served, _router = build_server(gateway, GatewaySettings())
            async with Client(served, mode=era) as client:  # pyright: ignore[reportArgumentType]
                answer = await client.call_tool("a", {"prompt": "hi"}, meta=odd)  # pyright: ignore[reportArgumentType]
    assert not answer.is_error
    assert answer.content[0].model_dump()["text"] == "done"
