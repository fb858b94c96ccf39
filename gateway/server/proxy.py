"""Proxy mode: the tools of chosen nodes, served beside the agents.

Tools keep the names their nodes give them. A call goes to the node and its `CallToolResult`
comes back as it was (every content kind, `structured_content`, `is_error`, `_meta`), the
node's progress passed through to the client as the node reported it. The only changes are
what the client's protocol era requires: the downstream server's own `serverInfo` stamp is
dropped (ours goes on), and a 2025-era client, which only takes an object as
`structuredContent`, gets a non-object value in the text content alone.

Resources, prompts and completions will be separate sources beside this one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from toolkits import Tool, ToolkitError, error_result

from ..engine import Gateway
from ..errors import ConfigError, ToolConflict
from ..run_context import HOPS_META_KEY

__all__ = ["ProxiedTools", "exposed_nodes", "incoming_hops"]

log = logging.getLogger(__name__)


def exposed_nodes(gateway: Gateway, *, expose_all: bool, names: Iterable[str]) -> list[str]:
    """The nodes whose tools are served: every node, or the ones named. Raises `ConfigError`."""
    if expose_all:
        return list(gateway.nodes)
    chosen = list(dict.fromkeys(names))
    missing = [name for name in chosen if name not in gateway.nodes]
    if missing:
        known = ", ".join(sorted(gateway.nodes)) or "none"
        raise ConfigError(f"gateway.expose: no node named {missing} (nodes: {known})")
    return chosen


class ProxiedTools:
    """The tools of some of the gateway's nodes, as MCP tools."""

    def __init__(self, gateway: Gateway, nodes: Iterable[str]) -> None:
        self._gateway = gateway
        self._nodes = list(nodes)
        self._routes: dict[str, Tool] = {}

    async def tools(self) -> list[types.Tool]:
        listed: dict[str, Sequence[Tool]] = {}

        async def list_node(name: str) -> None:
            listed[name] = await self._gateway.nodes[name].list_tools()

        async with anyio.create_task_group() as tg:
            for name in self._nodes:
                tg.start_soon(list_node, name)
        routes: dict[str, Tool] = {}
        for name in self._nodes:
            for tool in listed[name]:
                other = routes.setdefault(tool.name, tool)
                if other is not tool:
                    raise ToolConflict(
                        f"served tools: {tool.name!r} is offered by nodes {other.source_node!r} "
                        f"and {tool.source_node!r}; give one a prefix or expose only one"
                    )
        self._routes = routes
        return [_mcp_tool(tool) for tool in routes.values()]

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = self._routes.get(params.name)
        if tool is None:
            await self.tools()
            tool = self._routes.get(params.name)
            if tool is None:
                return error_result(f"no tool named {params.name!r} is served any more")
        node = tool.source_node
        arguments: Mapping[str, Any] = params.arguments or {}
        try:
            result = await self._gateway.call_tool(
                tool,
                arguments,
                on_progress=ctx.session.report_progress,
                hops=incoming_hops(ctx),
            )
        except ToolkitError as exc:
            return error_result(f"tool {tool.name!r} (node {node!r}) failed: {exc}")
        except Exception as exc:  # a node's bug must not take the connection down
            log.exception("node %r crashed calling %r", node, tool.name)
            return error_result(f"tool {tool.name!r} (node {node!r}) failed: {exc!r}")
        return fit_to_era(result, ctx.protocol_version)


def incoming_hops(ctx: ServerRequestContext[Any, Any]) -> int:
    """How many gateways the request passed through before us, from its `_meta`."""
    hops = (ctx.meta or {}).get(HOPS_META_KEY, 0)
    return hops if isinstance(hops, int) and hops >= 0 else 0


def fit_to_era(result: types.CallToolResult, protocol_version: str) -> types.CallToolResult:
    """The node's result as this client may receive it (see the module docstring)."""
    update: dict[str, Any] = {}
    meta = result.meta
    if meta is not None and SERVER_INFO_META_KEY in meta:
        update["meta"] = {k: v for k, v in meta.items() if k != SERVER_INFO_META_KEY} or None
    structured = result.structured_content
    if (
        protocol_version not in MODERN_PROTOCOL_VERSIONS
        and structured is not None
        and not isinstance(structured, dict)
    ):
        update["structured_content"] = None
    return result.model_copy(update=update) if update else result


def _mcp_tool(tool: Tool) -> types.Tool:
    annotations: types.ToolAnnotations | None = None
    if tool.annotations:
        try:
            annotations = types.ToolAnnotations.model_validate(dict(tool.annotations))
        except ValidationError:
            log.warning("tool %r: annotations are not MCP tool annotations; not served", tool.name)
    return types.Tool(
        name=tool.name,
        description=tool.description or None,
        input_schema=dict(tool.input_schema),
        annotations=annotations,
    )
