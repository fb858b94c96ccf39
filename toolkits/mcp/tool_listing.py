"""A server's tool list, page by page, where one bad entry does not take the others down.

The SDK client checks a `tools/list` page as a whole against the negotiated protocol version:
one tool whose `inputSchema` has no root `"type": "object"` (real servers ship
`{"anyOf": [...]}`) fails the page, and with it every tool of the server, whatever `exclude`
says. `ToolListing` asks the SDK client first; a page it refuses for its entries alone is
fetched again as the server sends it, and each entry is checked on its own:
- a schema with no root `type` is given `"type": "object"`: a tool's arguments are always an
  object, so the tool means the same (the rest of its schema is kept as sent);
- an entry that is still not a tool is left out, and so is a tool named `""`, which the SDK
  takes but nothing could call by name (a model is offered none, a prefix makes it `NODE__`);
- so is a tool whose `inputSchema` is not valid JSON Schema (`schema_check`), on any page: a
  provider that checks schemas (OpenAI) refuses a request offering it, every tool with it.
Either is said in one warning naming the server and the tool (once while it stays so; a tool
`include`/`exclude` leaves out is left out quietly). The other entries are the server's as
sent, and the SDK session learns the page as if it had listed it itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, cast

import mcp_types
from mcp import Client
from mcp.client.session import ClientSession
from mcp.shared.dispatcher import CallOptions
from mcp_types import methods
from pydantic import ValidationError

from .pages import every_page
from .schema_check import schema_fault

__all__ = ["ToolListing", "sift_tools"]

JsonObject = dict[str, Any]

Page = tuple[list[mcp_types.Tool], str | None]

_FAULTS_SAID = 3
_NAMELESS = "name: empty"


class ToolListing:
    """Lists a server's tools for node `node` (see the module docstring). `offered` says
    whether the node offers a tool of that name (its `include`/`exclude`)."""

    def __init__(self, node: str, *, log: logging.Logger, offered: Callable[[str], bool]) -> None:
        self._node = node
        self._log = log
        self._offered = offered
        self._said: frozenset[str] = frozenset()
        """What the last listing warned of: said again only once it changed."""

    async def fetch(self, client: Client) -> list[mcp_types.Tool]:
        """Every page of the server's tool list. Raises `MCPError`, and `ValidationError` for
        a page that is malformed beyond its entries."""
        said: dict[str, None] = {}  # in the order found, once each

        async def page(cursor: str | None) -> Page:
            try:
                listed = await client.list_tools(cursor=cursor)
            except ValidationError as exc:
                if not _in_entries(exc):
                    raise
                tools, next_cursor = await self._sifted(client, cursor, said)
            else:
                tools, next_cursor = listed.tools, listed.next_cursor
                if not all(tool.name for tool in tools):
                    tools = self._named(tools, said)
            return self._schema_checked(tools, said), next_cursor

        tools = await every_page(page, what="tools", log=self._log)
        for warning in said:
            if warning not in self._said:
                self._log.warning("%s", warning)
        self._said = frozenset(said)
        return tools

    def _named(self, tools: list[mcp_types.Tool], said: dict[str, None]) -> list[mcp_types.Tool]:
        """`tools` but those named `""` (the SDK client took them), each warned of."""
        if self._offered(""):
            said[_left_out(self._node, "tool ''", _NAMELESS)] = None
        return [tool for tool in tools if tool.name]

    def _schema_checked(
        self, tools: list[mcp_types.Tool], said: dict[str, None]
    ) -> list[mcp_types.Tool]:
        """`tools` but those offered whose `inputSchema` is not valid JSON Schema, each warned
        of: a provider that checks schemas refuses a request offering one, all tools with it."""
        kept: list[mcp_types.Tool] = []
        for tool in tools:
            fault = schema_fault(tool.input_schema) if self._offered(tool.name) else None
            if fault is None:
                kept.append(tool)
            else:
                said[
                    f"MCP server {self._node!r}: tool {tool.name!r} is left out: its inputSchema "
                    f"is not valid JSON Schema, which a provider would refuse with every tool "
                    f"offered beside it: {fault}"
                ] = None
        return kept

    async def _sifted(self, client: Client, cursor: str | None, said: dict[str, None]) -> Page:
        session = client.session
        raw = await _raw_page(session, cursor)
        entries = raw.get("tools")
        next_cursor = raw.get("nextCursor")
        if not isinstance(entries, list) or not isinstance(next_cursor, str | None):
            # Not a page of entries to sift: the SDK client's own error says what it is.
            return await _listed(client, cursor)
        tools, warnings = sift_tools(
            self._node, cast(list[object], entries), client.protocol_version, self._offered
        )
        said.update(dict.fromkeys(warnings))
        page = mcp_types.ListToolsResult(tools=tools, next_cursor=next_cursor)
        # What `list_tools` does with a page it took: the tools' output schemas, and on
        # 2026-07-28 their `x-mcp-header` arguments, for the calls that follow.
        complete = cursor is None and next_cursor is None
        absorbed = session._absorb_tool_listing(page, complete=complete)  # pyright: ignore[reportPrivateUsage]
        return absorbed.tools, absorbed.next_cursor


def sift_tools(
    node: str, entries: list[object], version: str, offered: Callable[[str], bool]
) -> tuple[list[mcp_types.Tool], list[str]]:
    """The tools among a page's `entries` (a schema with no root type given one), in order,
    and a warning for each entry given a type or left out (none for a tool not `offered`)."""
    tools: list[mcp_types.Tool] = []
    warnings: list[str] = []
    for index, entry in enumerate(entries):
        named = _name_of(entry)
        called = f"tool {named!r}" if named is not None else f"entry {index} of the tool list"
        tool, repaired, fault = _checked(entry, version)
        if named is not None and not offered(named):
            pass
        elif tool is None:
            warnings.append(_left_out(node, called, fault))
        elif repaired:
            warnings.append(
                f'MCP server {node!r}: {called} has an inputSchema with no "type"; it is taken '
                'as "type": "object" (a tool\'s arguments are always an object)'
            )
        if tool is not None:
            tools.append(tool)
    return tools, warnings


def _checked(entry: object, version: str) -> tuple[mcp_types.Tool | None, bool, str]:
    """`entry` as a tool, whether its schema was given a root type, and what is wrong with it
    when it is none."""
    tool, fault = _as_tool(entry, version)
    if tool is not None or not isinstance(entry, dict):
        return tool, False, fault
    fields = cast(JsonObject, entry)
    schema = fields.get("inputSchema")
    if not isinstance(schema, dict) or "type" in schema:
        return None, False, fault
    typed = {**fields, "inputSchema": {"type": "object", **cast(JsonObject, schema)}}
    repaired, _ = _as_tool(typed, version)
    return repaired, repaired is not None, fault


def _as_tool(entry: object, version: str) -> tuple[mcp_types.Tool | None, str]:
    """`entry` as the negotiated version's tool, or None and what is wrong with it."""
    try:
        methods.validate_server_result("tools/list", version, {"tools": [entry]})
    except ValidationError as exc:
        return None, _brief(exc)
    except (KeyError, ValueError):
        pass  # a version this SDK has no surface for: the model's own checks alone
    try:
        tool = mcp_types.Tool.model_validate(entry, by_name=False)
    except ValidationError as exc:
        return None, _brief(exc)
    return (tool, "") if tool.name else (None, _NAMELESS)


def _left_out(node: str, called: str, fault: str) -> str:
    return f"MCP server {node!r}: {called} is not a valid MCP tool and is left out: {fault}"


def _brief(exc: ValidationError) -> str:
    """What pydantic found wrong, placed inside the entry (not the page of one it checked)."""
    faults: list[str] = []
    for err in exc.errors()[:_FAULTS_SAID]:
        loc = err["loc"][2:] if err["loc"][:2] == ("tools", 0) else err["loc"]
        faults.append(f"{'.'.join(str(part) for part in loc) or 'the entry'}: {err['msg']}")
    return "; ".join(faults)


def _name_of(entry: object) -> str | None:
    if not isinstance(entry, dict):
        return None
    name = cast(JsonObject, entry).get("name")
    return name if isinstance(name, str) else None


def _in_entries(exc: ValidationError) -> bool:
    """Whether every fault pydantic found is inside one of the page's tools."""
    return all(
        len(err["loc"]) >= 2 and err["loc"][0] == "tools" and isinstance(err["loc"][1], int)
        for err in exc.errors()
    )


async def _raw_page(session: ClientSession, cursor: str | None) -> Mapping[str, Any]:
    """The `tools/list` page at `cursor` as the server sent it: the request the SDK session
    sends (its stamp: protocol version, and on 2026-07-28 client info and capabilities), and
    the answer before the session's checks."""
    params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
    request = mcp_types.ListToolsRequest(params=params)
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    options: CallOptions = {}
    session._stamp(data, options)  # pyright: ignore[reportPrivateUsage]
    dispatcher = session._dispatcher  # pyright: ignore[reportPrivateUsage]
    return await dispatcher.send_raw_request(data["method"], data.get("params"), options)


async def _listed(client: Client, cursor: str | None) -> Page:
    listed = await client.list_tools(cursor=cursor)
    return listed.tools, listed.next_cursor
