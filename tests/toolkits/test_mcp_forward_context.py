"""`forward_context`: a node fills the `context` argument of its tools that take one from the
calling run's context, hidden from the model (an in-process server; two real gateways in
tests/test_nested_gateways.py)."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import CallContext, CallInfo
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

AGENT_SCHEMA: dict[str, Any] = {  # what an agent served by another agent-gateway takes
    "type": "object",
    "properties": {
        "prompt": {"type": "string"},
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"prompt": {"type": "string"}, "context": {"type": "object"}},
                "required": ["prompt"],
                "additionalProperties": False,
            },
        },
        "context": {"type": "object"},
    },
    "required": ["prompt", "context"],
    "additionalProperties": False,
}
NOTE_SCHEMA: dict[str, Any] = {  # a `context` that is no object: some other tool's text
    "type": "object",
    "properties": {"text": {"type": "string"}, "context": {"type": "string"}},
}


def toy() -> tuple[ToyServer, list[dict[str, Any]]]:
    """A server with an agent-like tool and a note tool, recording each call's arguments."""
    server = ToyServer()
    received: list[dict[str, Any]] = []

    async def record(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        received.append(args)
        return text_result("ok")

    server.add("helper", record, schema=AGENT_SCHEMA)
    server.add("note", record, schema=NOTE_SCHEMA)
    return server, received


def node(server: ToyServer, *, forward: bool) -> McpToolkit:
    config = McpServerConfig(command="in-process", prefix="never", forward_context=forward)
    return McpToolkit("b", config, target=server.server)


def run_call(context: dict[str, Any] | None = None) -> CallContext:
    """An agent's call, in run r1 whose item has `context`."""
    return CallContext(info=CallInfo(run_id="r1", agent="a", context=context or {}))


async def test_the_model_is_offered_the_tool_without_context_and_clients_its_definition() -> None:
    server, _ = toy()
    async with node(server, forward=True) as forwarding:
        tools = {tool.name: tool for tool in await forwarding.list_tools()}
    offered = tools["helper"].input_schema
    assert offered["properties"].keys() == {"prompt", "items"}
    assert offered["properties"]["items"]["items"]["properties"].keys() == {"prompt"}
    assert offered["required"] == ["prompt"]
    definition = tools["helper"].definition
    assert definition is not None
    assert definition.input_schema == AGENT_SCHEMA  # what an MCP client is served: whole
    assert tools["note"].input_schema == NOTE_SCHEMA
    async with node(server, forward=False) as plain:
        assert [tool.input_schema for tool in await plain.list_tools()] == [
            AGENT_SCHEMA,
            NOTE_SCHEMA,
        ]


async def test_an_agents_call_carries_its_runs_context() -> None:
    server, received = toy()
    customer = {"customer": {"name": "Ada"}}
    async with node(server, forward=True) as forwarding:
        await forwarding.call_tool("helper", {"prompt": "Hi"}, context=run_call(customer))
        await forwarding.call_tool("helper", {"prompt": "Hi"}, context=run_call())
        await forwarding.call_tool("note", {"text": "t"}, context=run_call(customer))
        # An MCP client's own call through the gateway (no run): as it came.
        own = CallContext(info=CallInfo(subject="bob"))
        await forwarding.call_tool("helper", {"prompt": "Hi", "context": {"x": 1}}, context=own)
        await forwarding.call_tool("helper", {"prompt": "Hi"})
    assert received == [
        {"prompt": "Hi", "context": {"customer": {"name": "Ada"}}},
        {"prompt": "Hi"},  # the run has no context: none is made up
        {"text": "t"},
        {"prompt": "Hi", "context": {"x": 1}},
        {"prompt": "Hi"},
    ]
    async with node(server, forward=False) as plain:
        await plain.call_tool("helper", {"prompt": "Hi"}, context=run_call(customer))
    assert received[-1] == {"prompt": "Hi"}  # off by default: the server is told nothing


@pytest.mark.parametrize(
    "arguments",
    [
        {"prompt": "Hi", "context": {"customer": {"name": "Eve"}}},
        {"items": [{"prompt": "Hi"}, {"prompt": "Ho", "context": {"customer": "Eve"}}]},
    ],
)
async def test_an_agents_call_that_gives_context_itself_is_refused(
    arguments: dict[str, Any],
) -> None:
    server, received = toy()
    async with node(server, forward=True) as forwarding:
        result = await forwarding.call_tool(
            "helper", arguments, context=run_call({"customer": {"name": "Ada"}})
        )
    assert result.is_error
    assert result.content == [
        types.TextContent(
            text="`context` is not an argument to give: the gateway passes the run's own "
            "context to this tool (forward_context); call it without `context`"
        )
    ]
    assert received == []
