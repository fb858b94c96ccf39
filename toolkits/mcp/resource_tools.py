"""A server's resources as two tools of its node (`resource_tools = true`): for a model, which
reads only tools, a resource link in a result (`[resource link: demo://...]`) is otherwise a
dead end.

    list_resources()      the server's resources and resource templates, one a line
    read_resource(uri)    the resource's contents, as embedded resources

They are the node's own, named and routed as the server's tools are (`SERVER__read_resource`
with `prefix = "always"`), and go to the server as `resources/list`, `resources/templates/list`
and `resources/read` (`McpCatalog`), not as `tools/call`. A read's text is the model's as any
result's is (capped at the node's `max_output`), a blob described by its type and size, an
image or audio blob given as media too (`observation`). The server's error (an unknown URI)
is the tool's error result; a server that is down raises `ServerUnavailable`, as for a call.
A server's own tool of either name keeps it: ours is then left out, with a warning. A server
that declares no `resources` capability gets neither (a warning says `resource_tools` does
nothing there); each listing looks again, as a reconnect may find the server changed.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types
from mcp.shared.exceptions import MCPError

from ..base import CallContext, error_result
from .catalog import McpCatalog
from .error_text import error_text

__all__ = ["READ", "ResourceTools"]

READ = "read_resource"
LIST = "list_resources"
_READ_ONLY = mcp_types.ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class ResourceTools:
    """The two tools of one node's server (see the module)."""

    def __init__(self, node: str, catalog: McpCatalog, log: logging.Logger) -> None:
        self._node = node
        self._catalog = catalog
        self._log = log
        self._said: tuple[bool, frozenset[str]] = (False, frozenset())
        """What was last warned of: the server has no resources; its tools of our names."""

    def offer(
        self, offered: Mapping[str, mcp_types.Tool], capabilities: mcp_types.ServerCapabilities
    ) -> list[mcp_types.Tool]:
        """The tools to add to the server's `offered` ones, by a listing of the session with
        `capabilities`: none if it has no resources, none of a name its tools have (each
        warned of once for each change)."""
        # All empty: unknown (`protocol = "modern"`, no discovery); a read then says.
        unknown = capabilities == mcp_types.ServerCapabilities()
        none = not unknown and capabilities.resources is None
        taken: frozenset[str] = frozenset() if none else frozenset(self.names) & frozenset(offered)
        if (none, taken) != self._said:
            if none:
                self._log.warning(
                    "resource_tools has no effect: the server declares no resources (no "
                    "`resources` capability), so list_resources and read_resource are not offered"
                )
            if taken:
                self._log.warning(
                    "resource_tools: the server has tools named %s: they stay the server's, and "
                    "the gateway's own tool of that name is left out",
                    ", ".join(map(repr, sorted(taken))),
                )
        self._said = (none, taken)
        return [] if none else [t for t in self.definitions() if t.name not in offered]

    def definitions(self) -> list[mcp_types.Tool]:
        """The tools under their own names (the node names them as the server's)."""
        where = f"MCP server {self._node!r}"
        uri = {
            "type": "string",
            "description": "The resource's URI: from list_resources, a resource link in a "
            "tool result, or a resource template with its {placeholders} filled in.",
        }
        return [
            mcp_types.Tool(
                name=LIST,
                description=f"List the resources of {where} and its resource templates "
                "(URIs with {placeholders} to fill in), to read with read_resource.",
                input_schema={"type": "object", "properties": {}},
                annotations=_READ_ONLY,
            ),
            mcp_types.Tool(
                name=READ,
                description=f"Read a resource of {where} by its URI.",
                input_schema={"type": "object", "properties": {"uri": uri}, "required": ["uri"]},
                annotations=_READ_ONLY,
            ),
        ]

    names = (LIST, READ)

    async def call(
        self, original: str, arguments: Mapping[str, Any], context: CallContext | None
    ) -> mcp_types.CallToolResult:
        """Run `list_resources` or `read_resource`. Raises `ServerUnavailable` (the server is
        down, or gave no answer within the node's timeout); the server's error is the result."""
        if original == LIST:
            return await self._list()
        uri = arguments.get("uri")
        if not isinstance(uri, str) or not uri.strip():
            return error_result(f"{READ} needs `uri`, the resource's URI as a string")
        try:
            read = await self._catalog.read_resource(uri.strip(), context=context)
        except MCPError as exc:
            said = error_text(exc.code, exc.message)
            return error_result(f"MCP server {self._node!r} could not read {uri!r}: {said}")
        if not read.contents:
            return mcp_types.CallToolResult(
                content=[mcp_types.TextContent(text=f"resource {uri!r} has no contents")]
            )
        return mcp_types.CallToolResult(
            content=[mcp_types.EmbeddedResource(resource=each) for each in read.contents]
        )

    async def _list(self) -> mcp_types.CallToolResult:
        try:
            resources = await self._catalog.list_resources()
            templates = await self._catalog.list_resource_templates()
        except MCPError as exc:
            said = error_text(exc.code, exc.message)
            return error_result(f"MCP server {self._node!r} could not list its resources: {said}")
        lines = [_line(r.uri, r.name, r.title, r.mime_type, r.description) for r in resources]
        if not lines:
            lines.append(f"MCP server {self._node!r} lists no resources.")
        if templates:
            lines.append("Resource templates (fill in the {placeholders} to read one):")
            lines += [
                _line(t.uri_template, t.name, t.title, t.mime_type, t.description)
                for t in templates
            ]
        return mcp_types.CallToolResult(content=[mcp_types.TextContent(text="\n".join(lines))])


def _line(uri: str, name: str, title: str | None, mime: str | None, description: str | None) -> str:
    """One resource as a model reads it: `URI  NAME (TYPE): DESCRIPTION`."""
    line = f"{uri}  {title or name}"
    if mime:
        line += f" ({mime})"
    if description:
        line += f": {' '.join(description.split())}"
    return line
