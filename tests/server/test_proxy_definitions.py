"""Proxy mode: an MCP node's tools are served as its server defines them."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from gateway import Gateway
from gateway.loops import VIA_META_KEY
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import ERAS, calculator_gateway, serve

pytestmark = pytest.mark.anyio

RICH = types.Tool(
    name="forecast",
    title="Weather forecast",
    description="Forecasts the weather.",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    output_schema={
        "type": "object",
        "properties": {"celsius": {"type": "number"}},
        "required": ["celsius"],
    },
    icons=[types.Icon(src="https://example.com/sun.png", mime_type="image/png")],
    annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
    _meta={"example.com/owner": "weather-team"},
)


async def forecast(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
    result = text_result("21 degrees")
    return result.model_copy(update={"structured_content": {"celsius": 21}})


@pytest.mark.parametrize("era", ERAS)
async def test_the_whole_definition_is_served_under_the_nodes_name(era: str) -> None:
    toy = ToyServer("weather")
    toy.tools["forecast"] = (RICH, forecast)
    node = McpToolkit("weather", McpServerConfig(command="in-process"), target=toy.server)
    gateway = calculator_gateway(nodes=[node])
    async with node, Client(serve(gateway, expose_tools=True), mode=era) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("weather__forecast", {"city": "Oslo"})
    served = listed["weather__forecast"]
    assert served.model_dump(exclude={"name", "meta"}) == RICH.model_dump(exclude={"name", "meta"})
    # Its `_meta` as the server's, with the gateways it came through (`gateway.loops`).
    assert served.meta == {**(RICH.meta or {}), VIA_META_KEY: [gateway.gateway_id]}
    assert result.structured_content == {"celsius": 21}
    # A local node's tools are still described by their `Tool`.
    assert listed["calculator"].title is None
    assert "expression" in listed["calculator"].input_schema["properties"]


async def test_a_gateway_without_mcp_nodes_serves_its_tools_as_before() -> None:
    async with Client(serve(Gateway([], []), expose_tools=True)) as client:
        assert (await client.list_tools()).tools == []
