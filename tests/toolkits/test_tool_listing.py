"""A tool list with entries that are not valid MCP tools: the node keeps the others.

A real subprocess server (`tests/servers/odd_stdio.py`) lists a tool whose `inputSchema` has
no root `type`, one whose schema is a string's, and an entry with no name, beside good tools.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.server.proxying import gateway_front
from tests.servers.inprocess import Context, ToolHandler, ToyServer, text_result
from tests.servers.odd_stdio import TOOLS
from toolkits.mcp import McpServerConfig, McpToolkit, PrefixPolicy
from toolkits.mcp.pages import every_page
from toolkits.mcp.schema_check import schema_fault
from toolkits.mcp.tool_listing import sift_tools
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ODD = Path(__file__).parents[1] / "servers" / "odd_stdio.py"
FIXTURES = Path(__file__).parents[1] / "models" / "fixtures"
GOOD = [
    *("echo", "either", "weather", "weather_bad", "cut", "plain", "deep", "malformed"),
    "exclusive",
]


def odd(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[str(ODD)], **keys)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_one_bad_tool_leaves_the_others_listed_and_is_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    with anyio.fail_after(30):
        async with McpToolkit("odd", odd(prefix="never")) as node:
            tools = {tool.name: tool for tool in await node.list_tools()}
            assert node.health.state == "ready"
            assert list(tools) == GOOD
            either = tools["either"]
            # Given the root type every tool's arguments have; the rest as the server sent it.
            assert either.input_schema == {"type": "object", **TOOLS[1]["inputSchema"]}
            said = await node.call_tool("either", {"id": "x"})
            assert result_text(said) == 'either: {"id": "x"}'

            await node.refresh_tools()  # listed again: the same, not said again
            assert [tool.name for tool in await node.list_tools()] == GOOD
    assert _warnings(caplog) == [
        "MCP server 'odd': tool 'either' has an inputSchema with no \"type\"; it is taken as "
        '"type": "object" (a tool\'s arguments are always an object)',
        "MCP server 'odd': tool 'stringly' is not a valid MCP tool and is left out: "
        "inputSchema.type: Input should be 'object'",
        "MCP server 'odd': entry 3 of the tool list is not a valid MCP tool and is left out: "
        "name: Field required",
    ]


async def test_a_bad_tool_excluded_is_left_out_quietly(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    with anyio.fail_after(30):
        async with McpToolkit("odd", odd(prefix="never", exclude=["stringly"])) as node:
            assert [tool.name for tool in await node.list_tools()] == GOOD
    assert not any("stringly" in warning for warning in _warnings(caplog))


async def test_a_proxy_serves_the_good_tools_as_the_server_defines_them() -> None:
    with anyio.fail_after(60):
        async with gateway_front(odd()) as (url, _, _), Client(url) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            called = await client.call_tool("d__either", {"url": "u"})
    assert sorted(listed) == sorted(f"d__{name}" for name in GOOD)
    assert listed["d__either"].input_schema == {"type": "object", **TOOLS[1]["inputSchema"]}
    assert listed["d__echo"].description == "echo the arguments"
    assert called.content == [types.TextContent(text='either: {"url": "u"}')]


@pytest.mark.parametrize("prefix", ["never", "always"])
async def test_a_tool_named_empty_is_left_out_and_warned_of_by_name(
    prefix: PrefixPolicy, caplog: pytest.LogCaptureFixture
) -> None:
    # The SDK client takes the page (nothing else in it is wrong); no model takes "" as a
    # name, and `sch__` would name nothing.
    server = ToyServer()
    server.add_echo("")
    server.add_echo("search")
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    with anyio.fail_after(10):
        async with McpToolkit(
            "sch", McpServerConfig(command="in-process", prefix=prefix), target=server.server
        ) as node:
            offered = [tool.name for tool in await node.list_tools()]
            await node.refresh_tools()  # listed again: not said again
    assert offered == ["search" if prefix == "never" else "sch__search"]
    assert _warnings(caplog) == [
        "MCP server 'sch': tool '' is not a valid MCP tool and is left out: name: empty"
    ]


def test_an_entry_named_empty_is_left_out_where_the_page_is_sifted() -> None:
    entries: list[object] = [{"name": "", "inputSchema": {"type": "object"}}, TOOLS[0]]
    tools, warnings = sift_tools("s", entries, "2025-11-25", lambda _: True)
    assert [tool.name for tool in tools] == ["echo"]
    assert warnings == [
        "MCP server 's': tool '' is not a valid MCP tool and is left out: name: empty"
    ]


def test_an_entry_that_is_no_object_is_named_by_its_place() -> None:
    tools, warnings = sift_tools("s", ["echo", TOOLS[0]], "2025-11-25", lambda _: True)
    assert [tool.name for tool in tools] == ["echo"]
    assert warnings == [
        "MCP server 's': entry 0 of the tool list is not a valid MCP tool and is left out: "
        "the entry: Input should be a valid dictionary or instance of Tool"
    ]


# What a provider that checks tool schemas (OpenAI) refuses, and with it every tool beside.
INVALID_SCHEMAS: dict[str, dict[str, Any]] = {
    "typ12": {"type": "object", "properties": {"a": {"type": 12}}},
    "badref": {"type": "object", "properties": {"a": {"$ref": "#/definitions/nope"}}},
    "badmin": {"type": "object", "properties": {"a": {"type": "integer", "minimum": "x"}}},
}
# What real servers send and providers take.
VALID_SCHEMAS: dict[str, dict[str, Any]] = {
    "draft07": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"when": {"type": "string", "format": "date-time"}},
        "properties": {"at": {"$ref": "#/definitions/when"}},
    },
    "defs": {
        "type": "object",
        "$defs": {"a b": {"$anchor": "ab", "type": "string"}},
        "properties": {"x": {"$ref": "#/$defs/a%20b"}, "y": {"$ref": "#ab"}},
    },
    "ecma": {  # JavaScript regexes (zod's, a common email one) Python's `re` refuses
        "type": "object",
        "properties": {
            "s": {"type": "string", "pattern": r"^\p{L}+(?<y>\d{4})\k<y>\u{1F600}?\cJ?$"},
            "e": {"type": "string", "pattern": r"^[\w-\.]+@([\w-]+\.)+[\w-]{2,4}$"},
            "l": {"type": "string", "pattern": r"(?<=^|,)\w+"},
        },
    },
    "alias": {  # a $schema jsonschema does not know: read as unnamed (here draft-07's tuple)
        "$schema": "https://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "integer"}]}},
        "x-vendor": {"$ref": "#/nowhere"},  # a vendor keyword's data, no reference
    },
    "older": {  # no $schema, written to draft-07 (a tuple) and draft-04 (a boolean bound)
        "type": "object",
        "properties": {
            "range": {"type": "array", "items": [{"type": "integer"}], "additionalItems": False},
            "n": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
        },
    },
    "loose": {
        "type": "object",
        "x-ui": {"type": 12},  # unknown keywords are anything
        "properties": {
            "d": {"type": "string", "format": "made-up"},
            "e": {"enum": [{"$ref": "#/nowhere"}]},  # data, no reference
            "r": {"$ref": "https://example.com/schema.json"},
        },
    },
}


async def test_a_tool_whose_schema_is_not_json_schema_is_left_out_and_warned_of_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ToyServer()
    for name, schema in {**INVALID_SCHEMAS, **VALID_SCHEMAS}.items():
        server.add(name, _answer(name), schema=schema)
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    with anyio.fail_after(10):
        async with McpToolkit(
            "sch", McpServerConfig(command="in-process", prefix="never"), target=server.server
        ) as node:
            assert [tool.name for tool in await node.list_tools()] == list(VALID_SCHEMAS)
            called = await node.call_tool("draft07", {"at": "now"})
            await node.refresh_tools()  # listed again: not said again
            assert [tool.name for tool in await node.list_tools()] == list(VALID_SCHEMAS)
    assert result_text(called) == "draft07"
    said = "is left out: its inputSchema is not valid JSON Schema, which a provider would refuse"
    assert _warnings(caplog) == [
        f"MCP server 'sch': tool 'typ12' {said} with every tool offered beside it: "
        "properties.a.type: 12 is not valid under any of the given schemas",
        f"MCP server 'sch': tool 'badref' {said} with every tool offered beside it: "
        "properties.a.$ref: $ref '#/definitions/nope' points at nothing in the schema",
        f"MCP server 'sch': tool 'badmin' {said} with every tool offered beside it: "
        "properties.a.minimum: 'x' is not of type 'number'",
    ]


async def test_a_page_that_is_sifted_leaves_out_an_invalid_schema_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The odd server's page is refused by the SDK client (`stringly`), so it is sifted.
    extra = [{"name": "typ12", "inputSchema": INVALID_SCHEMAS["typ12"]}]
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    config = McpServerConfig(
        command=sys.executable, args=[str(ODD), json.dumps(extra)], prefix="never"
    )
    with anyio.fail_after(30):
        async with McpToolkit("odd", config) as node:
            assert [tool.name for tool in await node.list_tools()] == GOOD
    assert _warnings(caplog)[-1] == (
        "MCP server 'odd': tool 'typ12' is left out: its inputSchema is not valid JSON Schema, "
        "which a provider would refuse with every tool offered beside it: "
        "properties.a.type: 12 is not valid under any of the given schemas"
    )


async def test_a_tool_with_an_invalid_schema_excluded_is_left_out_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = ToyServer()
    server.add("typ12", _answer("typ12"), schema=INVALID_SCHEMAS["typ12"])
    server.add("ok", _answer("ok"))
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    config = McpServerConfig(command="in-process", prefix="never", exclude=["typ12"])
    with anyio.fail_after(10):
        async with McpToolkit("sch", config, target=server.server) as node:
            assert [tool.name for tool in await node.list_tools()] == ["ok"]
    assert _warnings(caplog) == []


@pytest.mark.parametrize("listed", sorted(FIXTURES.glob("*.json")), ids=lambda path: path.stem)
def test_every_schema_real_servers_list_is_taken(listed: Path) -> None:
    # Tool lists recorded from real servers, and the forms JavaScript servers write (draft-07
    # tuples with no $schema among them), which the providers' schemas are made from.
    tools: list[dict[str, Any]] = json.loads(listed.read_text())["tools"]
    faults = {tool["name"]: schema_fault(tool["inputSchema"]) for tool in tools}
    assert faults == dict.fromkeys(faults)


def test_a_schema_deeper_than_the_check_descends_is_taken_unchecked() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(300):
        schema = {"type": "object", "properties": {"a": schema}}
    assert schema_fault(schema) is None


def test_a_schema_is_judged_by_its_content_whatever_its_key_order() -> None:
    schema = INVALID_SCHEMAS["badmin"]
    reordered = {"properties": schema["properties"], "type": "object"}
    assert schema_fault(schema) == schema_fault(reordered) is not None


def _answer(name: str) -> ToolHandler:
    async def answer(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return text_result(name)

    return answer


class RepeatingPages(ToyServer):
    """Each page lists every tool again, its next cursor always `same`."""

    async def _list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.list_requests += 1
        tools = [tool for tool, _ in self.tools.values()]
        return types.ListToolsResult(tools=tools, next_cursor="same")


async def test_a_repeated_cursor_ends_the_listing_with_one_warning_for_it_and_one_for_the_names(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = RepeatingPages()
    server.add_echo("echo")
    server.add_echo("hang")
    caplog.set_level(logging.WARNING, logger="toolkits.mcp")
    with anyio.fail_after(10):
        async with McpToolkit(
            "loop", McpServerConfig(command="in-process", prefix="never"), target=server.server
        ) as node:
            assert [tool.name for tool in await node.list_tools()] == ["echo", "hang"]
    assert server.list_requests == 2  # the first page, and the page at "same"
    assert _warnings(caplog) == [
        "stopped listing tools: the server repeated cursor 'same', which would list the same "
        "pages again",
        "the server lists 2 tool names more than once ('echo' x2, 'hang' x2); keeping the "
        "first of each",
    ]


async def test_a_cursor_seen_on_any_earlier_page_ends_a_listing_of_anything() -> None:
    # Resources, templates and prompts are listed by the same `every_page`.
    asked: list[str | None] = []
    cursors = {None: "a", "a": "b", "b": "a"}

    async def page(cursor: str | None) -> tuple[list[str], str | None]:
        asked.append(cursor)
        return [f"item at {cursor}"], cursors[cursor]

    with anyio.fail_after(5):
        items = await every_page(page, what="prompts", log=logging.getLogger("test"))
    assert asked == [None, "a", "b"]
    assert items == ["item at None", "item at a", "item at b"]
