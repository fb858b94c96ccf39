"""Proxy mode: the nodes' own tools, served beside the agents and relayed intact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types
import pytest
from mcp import Client

from gateway import ConfigError, Gateway, ToolConflict
from gateway.config import GatewaySettings
from gateway.server import build_server
from gateway.server.server import SERVER_VERSION
from toolkits import CallContext, Tool

from .support import ERAS, ProgressLog, calculator_agent, calculator_gateway, serve

pytestmark = pytest.mark.anyio

IMAGE = types.ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
AUDIO = types.AudioContent(data="UklGRg==", mime_type="audio/wav")
EMBEDDED = types.EmbeddedResource(
    resource=types.TextResourceContents(
        uri="file:///notes.txt", text="hello", mime_type="text/plain"
    )
)
LINK = types.ResourceLink(uri="file:///big.csv", name="big.csv", mime_type="text/csv")


class RichNode:
    """A toolkit node whose results use every content kind, meta, and progress."""

    name = "rich"

    def __init__(self, structured: Any) -> None:
        self._structured = structured

    async def list_tools(self) -> Sequence[Tool]:
        schema = {"type": "object", "properties": {"fail": {"type": "boolean"}}}
        return [
            Tool(
                name="render",
                description="Renders things.",
                input_schema=schema,
                source_node=self.name,
                is_from_toolkit=False,
                annotations={"readOnlyHint": True},
            )
        ]

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        context: CallContext | None = None,
    ) -> types.CallToolResult:
        assert name == "render"
        if context is not None and context.on_progress is not None:
            await context.on_progress(1, 3, "drawing")
            await context.on_progress(3, 3, "done")
        return types.CallToolResult(
            content=[types.TextContent(text="see attached"), IMAGE, AUDIO, EMBEDDED, LINK],
            structured_content=self._structured,
            is_error=bool(arguments.get("fail")),
            _meta={
                "example.com/trace": "t-1",
                # What a 2026-07-28 downstream server stamps; it is not ours to relay.
                "io.modelcontextprotocol/serverInfo": {"name": "downstream", "version": "1"},
            },
        )


@pytest.mark.parametrize("era", ERAS)
async def test_exposed_tools_are_listed_beside_the_agents_and_called(era: str) -> None:
    gateway = calculator_gateway(calculator_agent([]))
    async with Client(serve(gateway, expose_tools=True), mode=era) as client:
        listing = await client.list_tools()
        result = await client.call_tool("calculator", {"expression": "2 ** 10"})
        failed = await client.call_tool("calculator", {"expression": "1/0"})
    assert [t.name for t in listing.tools] == ["assistant", "calculator"]
    assert "expression" in listing.tools[1].input_schema["properties"]
    assert result.content == [types.TextContent(text="1024")]
    assert result.structured_content == {"response": "1024"}
    assert failed.is_error
    assert isinstance(failed.content[0], types.TextContent)
    assert "division by zero" in failed.content[0].text


async def test_only_the_named_nodes_are_exposed() -> None:
    gateway = calculator_gateway(calculator_agent([]), nodes=[RichNode({"a": 1})])
    async with Client(serve(gateway, expose=["rich"])) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        hidden = await client.call_tool("calculator", {"expression": "1"})
    assert names == ["assistant", "render"]
    assert hidden.is_error
    with pytest.raises(ConfigError, match=r"gateway.expose: no node named 'nope' \(nodes: "):
        build_server(gateway, GatewaySettings(expose=["nope"]))


@pytest.mark.parametrize("era", ERAS)
async def test_a_proxied_result_arrives_intact_with_its_progress(era: str) -> None:
    gateway = calculator_gateway(nodes=[RichNode({"width": 3, "ok": True})])
    progress = ProgressLog()
    async with Client(serve(gateway, expose=["rich"]), mode=era) as client:
        [tool] = (await client.list_tools()).tools
        result = await client.call_tool("render", {}, progress_callback=progress)
        failed = await client.call_tool("render", {"fail": True})
    assert tool.annotations == types.ToolAnnotations(read_only_hint=True)
    assert result.content == [types.TextContent(text="see attached"), IMAGE, AUDIO, EMBEDDED, LINK]
    assert result.structured_content == {"width": 3, "ok": True}
    assert not result.is_error
    assert failed.is_error
    assert result.meta is not None
    assert result.meta["example.com/trace"] == "t-1"
    server_info = result.meta.get("io.modelcontextprotocol/serverInfo")
    # The 2026-07-28 stamp names this server, never the downstream one; 2025 has none.
    if era == "legacy":
        assert server_info is None
    else:
        assert server_info == {"name": "agent-gateway", "version": SERVER_VERSION}
    assert progress.updates == [(1, 3, "drawing"), (3, 3, "done")]


@pytest.mark.parametrize(("era", "relayed"), [("auto", [1, 2]), ("legacy", None)])
async def test_a_non_object_structured_result_reaches_each_era_as_it_allows(
    era: str, relayed: object
) -> None:
    gateway = calculator_gateway(nodes=[RichNode([1, 2])])
    async with Client(serve(gateway, expose_tools=True), mode=era) as client:
        result = await client.call_tool("render", {})
    assert not result.is_error
    assert result.structured_content == relayed
    assert len(result.content) == 5


async def test_an_agent_and_a_tool_of_the_same_name_are_refused_at_startup() -> None:
    gateway = calculator_gateway(calculator_agent([], name="render"), nodes=[RichNode({})])
    _server, router = build_server(gateway, GatewaySettings(expose_tools=True))
    with pytest.raises(ToolConflict, match="tool 'render' is listed by nodes 'render' and 'rich'"):
        await router.check()


class ManyNode:
    """A toolkit node with 267 tools: `t000` ... `t266`."""

    name = "many"

    async def list_tools(self) -> Sequence[Tool]:
        schema: dict[str, Any] = {"type": "object", "properties": {}}
        return [
            Tool(f"t{i:03}", "", schema, source_node=self.name, is_from_toolkit=False)
            for i in range(267)
        ]

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, context: CallContext | None = None
    ) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=name)])


@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_tool_among_many_is_refused_briefly(era: str) -> None:
    async with Client(serve(Gateway([ManyNode()], []), expose_tools=True), mode=era) as client:
        wrong = await client.call_tool("f__t003", {})
        none_close = await client.call_tool("zzzzzzzz", {})
    assert wrong.is_error
    assert wrong.content == [
        types.TextContent(
            text="no tool named 'f__t003'; did you mean 't003'? (267 tools: tools/list names them)"
        )
    ]
    assert none_close.content == [
        types.TextContent(text="no tool named 'zzzzzzzz' (267 tools: tools/list names them)")
    ]
