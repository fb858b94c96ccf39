"""`forward_context`: a node fills the `context` argument of its tools that take one from the
calling run's context, hidden from the model (an in-process server; two real gateways in
tests/test_nested_gateways.py)."""

from __future__ import annotations

import json
from typing import Any, cast

import mcp_types as types
import pytest
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel

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


class Customer(BaseModel):
    name: str


class Ctx(BaseModel):
    customer: Customer


def python_server() -> MCPServer:
    """A server written with the SDK, as a trusted in-house one is: its `context` is optional
    (`dict | None`: an `anyOf` with null) or a pydantic model (a `$ref` into `$defs`)."""
    app = MCPServer("crm")

    @app.tool()
    def whoami(question: str, context: dict[str, Any] | None = None) -> str:
        """Who the customer is."""
        return json.dumps({"question": question, "context": context})

    @app.tool()
    def typed(question: str, context: Ctx) -> str:
        """Who the customer is, typed."""
        return json.dumps({"question": question, "context": context.model_dump()})

    return app


async def test_a_python_servers_optional_or_typed_context_is_forwarded_and_hidden() -> None:
    customer = {"customer": {"name": "Ada"}}
    config = McpServerConfig(command="in-process", prefix="never", forward_context=True)
    async with McpToolkit("crm", config, target=python_server()) as forwarding:
        tools = {tool.name: tool for tool in await forwarding.list_tools()}
        answers = [
            await forwarding.call_tool(name, {"question": "q"}, context=run_call(customer))
            for name in ("whoami", "typed")
        ]
        forged = {"question": "q", "context": {"customer": {"name": "Mallory"}}}
        refused = await forwarding.call_tool("whoami", forged, context=run_call(customer))
    for name in ("whoami", "typed"):
        offered = tools[name].input_schema
        assert offered["properties"].keys() == {"question"}
        assert offered["required"] == ["question"]
        assert "$defs" not in offered  # Ctx's shape went with the property that used it
    texts = [cast(types.TextContent, answer.content[0]).text for answer in answers]
    assert [json.loads(text)["context"] for text in texts] == [customer, customer]
    assert refused.is_error
    assert "`context` is not an argument to give" in str(refused.content)


@pytest.mark.parametrize(
    "declared",
    [
        {"type": ["object", "null"]},
        {"oneOf": [{"type": "null"}, {"type": "object"}]},
        {"allOf": [{"$ref": "#/$defs/Ctx"}], "description": "the run's"},
        {"$ref": "#/definitions/Ctx"},
    ],
)
async def test_each_way_to_write_a_context_object_is_one(declared: dict[str, Any]) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"q": {"$ref": "#/$defs/Id"}, "context": declared},
        "$defs": {
            "Ctx": {"type": "object", "properties": {"id": {"$ref": "#/$defs/Id"}}},
            "Id": {"type": "string"},
        },
        "definitions": {"Ctx": {"type": "object"}, "Other": {"type": "string"}},
    }
    server = ToyServer()
    received: list[dict[str, Any]] = []

    async def record(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        received.append(args)
        return text_result("ok")

    server.add("helper", record, schema=schema)
    async with node(server, forward=True) as forwarding:
        [tool] = await forwarding.list_tools()
        await forwarding.call_tool("helper", {"q": "x"}, context=run_call({"id": "7"}))
    offered = tool.input_schema
    assert offered["properties"].keys() == {"q"}
    # The definitions left are those the rest still uses.
    assert (offered["$defs"], "definitions" in offered) == ({"Id": {"type": "string"}}, False)
    assert received == [{"q": "x", "context": {"id": "7"}}]


@pytest.mark.parametrize(
    "declared",
    [{"type": "string"}, {"anyOf": [{"type": "string"}, {"type": "null"}]}, {"$ref": "#/$defs/S"}],
)
async def test_a_context_that_takes_no_object_is_the_models_and_one_warning_says_so(
    declared: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    schema = {
        "type": "object",
        "properties": {"context": declared},
        "$defs": {"S": {"type": "string", "$ref": "#/$defs/S"}},  # refers to itself: ends
    }
    server = ToyServer()
    received: list[dict[str, Any]] = []

    async def record(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        received.append(args)
        return text_result("ok")

    server.add("note", record, schema=schema)
    caplog.set_level("WARNING", logger="toolkits.mcp.b")
    async with node(server, forward=True) as forwarding:
        [tool] = await forwarding.list_tools()
        await forwarding.refresh_tools()  # listed again: not said again
        await forwarding.call_tool("note", {"context": "mine"}, context=run_call({"id": "7"}))
    assert tool.input_schema == schema
    assert received == [{"context": "mine"}]
    assert [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.b"] == [
        "forward_context is set, but none of the server's tools takes a `context` object (an "
        "input schema property `context` that takes a JSON object): the run's context is "
        "passed to none of them"
    ]


async def test_a_request_refused_as_invalid_with_the_context_in_it_names_the_context() -> None:
    server = ToyServer()

    async def too_long(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        if "context" in args:  # as a gateway past its max_request_bytes answers
            raise MCPError(types.INVALID_REQUEST, "Invalid Request: the message is too long")
        return text_result("ok")

    server.add("helper", too_long, schema=AGENT_SCHEMA)
    customer = {"customer": {"name": "Ada"}}
    async with node(server, forward=True) as forwarding:
        refused = await forwarding.call_tool("helper", {"prompt": "Hi"}, context=run_call(customer))
        without = await forwarding.call_tool("helper", {"prompt": "Hi"}, context=run_call())
    assert refused.is_error
    size = len(json.dumps(customer).encode())
    assert refused.content == [
        types.TextContent(
            text="MCP error -32600: Invalid Request: the message is too long (the request held "
            f"the run's context, {size} bytes, which the gateway adds to this tool's calls: "
            "forward_context; you cannot shrink it: a smaller run context, or a larger "
            "max_request_bytes on that server, lets it through)"
        )
    ]
    assert (without.is_error, without.content) == (False, [types.TextContent(text="ok")])
