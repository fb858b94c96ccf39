"""Proxy mode: the tools of chosen nodes, served beside the agents.

Tools keep the names their nodes give them (the names models take, `toolkits.mcp.naming`);
a call by an MCP server's own name for a tool reaches it too, when no other tool has that
name. An MCP node's tools are served as its server defines them (title, output schema, icons,
annotations, `_meta`), under those names; a local node's as its `Tool`s describe them. A call goes to the node and its `CallToolResult` comes
back as it was (every content kind, `structured_content`, `is_error` only if the server sent
it, `_meta`), the node's progress passed through to the client as the node reported it; the
downstream server's requests during the call (sampling, elicitation, roots) go to our client
(`client_requests.ask_client`). The only changes are what the client's protocol era requires:
the downstream server's own `serverInfo` stamp is dropped (ours goes on), and a 2025-era
client, which only takes an object as `structuredContent`, gets a non-object value in the text
content alone. Each call is traced with the caller's authenticated subject. A call of a tool
its server's approval rule covers runs only once the client approves it (`proxied_approval`).

The nodes' resources, prompts and completions are served by `proxied_resources` and
`proxied_prompts`.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import SerializerFunctionWrapHandler, ValidationError, model_serializer

from toolkits import AsksCaller, CallContext, Tool, ToolkitError, error_result
from toolkits.mcp import protocol_error

from ...catalog import Routes, echoed
from ...engine import Gateway
from ...errors import ConfigError, GatewayError
from ...trace import trace_context_in
from ..client_requests.ask_client import for_client
from ..serving import client_quota
from ..transports.auth import authenticated_subject
from .pass_through_rounds import call_result
from .proxied_approval import ProxiedApprovals
from .relaying import hop_meta, incoming_hops, relayed_error, without_stamp

__all__ = ["ProxiedTools", "exposed_nodes", "fit_to_era", "incoming_hops"]

log = logging.getLogger(__name__)


def exposed_nodes(gateway: Gateway, *, expose_all: bool, names: Iterable[str]) -> list[str]:
    """The nodes whose tools are served: every node, or the ones named. Raises `ConfigError`."""
    if expose_all:
        return list(gateway.nodes)
    chosen = list(dict.fromkeys(names))
    missing = [name for name in chosen if name not in gateway.nodes]
    if missing:
        known = ", ".join(sorted(gateway.nodes)) or "none"
        named = ", ".join(repr(name) for name in missing)  # the names, not a list's repr
        raise ConfigError(f"gateway.expose: no node named {named} (nodes: {known})")
    return chosen


class ProxiedTools:
    """The tools of some of the gateway's nodes, as MCP tools."""

    def __init__(self, gateway: Gateway, nodes: Iterable[str]) -> None:
        self._gateway = gateway
        self._nodes = list(nodes)
        self._routes = Routes[Tool](self.tools)
        self._served: tuple[dict[str, Tool], list[types.Tool]] = ({}, [])
        """The last tools listed, and what was served of them (the same while they are)."""
        self._gated: dict[str, str] = {}
        """The tools of the last listing a node's approval rule covers: the rule, named."""
        self._passable: dict[str, Tool] = {}
        """The others: their calls may pass straight through (`passable`)."""
        self._approvals = ProxiedApprovals()
        self._own_names: dict[str, str] = {}
        """Each server's own name of a tool served under another, if no other tool has it."""

    async def tools(self) -> list[types.Tool]:
        listed = await self._gateway.tools_of(
            self._nodes, "served tools", remedy="give one a prefix or expose only one"
        )
        if listed is not self._served[0]:  # `tools_of` gives the same dict while unchanged
            # An MCP server's tools as it defines them, under the names their nodes give them.
            served = [tool.definition or _mcp_tool(tool) for tool in listed.values()]
            self._served = (listed, served)
            self._gate(listed)
            self._own_names = _own_names(listed)
        self._routes.update(listed)
        return self._served[1]

    def _gate(self, listed: dict[str, Tool]) -> None:
        """Decide, for a new listing, which tools need approval: once, not per call."""
        node_rule = self._gateway.node_rule
        gated = {name: rule for name, tool in listed.items() if (rule := node_rule(tool))}
        self._gated = gated
        self._passable = (
            {name: tool for name, tool in listed.items() if name not in gated} if gated else listed
        )

    def passable(self, name: str) -> Tool | None:
        """The tool served as `name`, as last listed (no listing here), if its calls may pass
        straight through: no approval rule covers it."""
        return self._passable.get(name)

    def served_name(self, own_name: str) -> str | None:
        """The name the tool its server calls `own_name` is served under, as last listed,
        when that tool alone has the name (a client that called the server directly calls
        it so; `a.b` is served as `a_b`, a name models take)."""
        return self._own_names.get(own_name)

    def node_of(self, name: str) -> str | None:
        tool = self._routes.get(name)
        return tool.source_node if tool is not None else None

    def why_missing(self, name: str) -> str | None:
        """Why `name`, named like a tool of one of these nodes (`NODE__TOOL`), is not listed:
        that node is not ready (starting, or failed), so its tools are not known now; or a
        tool was offered as `name` until it was renamed (then it says the name now)."""
        health = self._gateway.not_ready(name, self._nodes)
        if health is None:
            return self._gateway.renamed(name, self._nodes)
        return f"tool {name!r} is not offered now: its server is not ready ({health})"

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        tool = await self._routes.find(params.name)
        if tool is None:
            return error_result(f"no tool named {echoed(params.name)} is served any more")
        found = self._gateway.nodes[tool.source_node]
        asks = isinstance(found, AsksCaller) and found.asks_caller
        rule = self._gated.get(params.name)
        if rule is not None:
            run = partial(self._run, ctx, tool, asks=asks)
            return await self._approvals.call(ctx, params, rule, run, parks=asks)
        return await self._run(ctx, tool, params, asks=asks)

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        tool: Tool,
        params: types.CallToolRequestParams,
        *,
        asks: bool,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The call, its server's requests put to our client if its node `asks` them."""
        node = tool.source_node
        arguments: Mapping[str, Any] = params.arguments or {}
        subject = authenticated_subject()  # read here: `work` may run in another task
        trace = trace_context_in(ctx.meta)

        async def work(context: CallContext) -> types.CallToolResult:
            try:
                return await self._gateway.call_tool(
                    tool,
                    arguments,
                    context=context,
                    hops=incoming_hops(ctx),
                    quota=client_quota(ctx, self._gateway),
                    subject=subject,
                    caller_trace=trace,
                )
            except (ToolkitError, GatewayError) as exc:  # e.g. down, timed out, too many hops
                return error_result(f"tool {tool.name!r} (node {node!r}) failed: {exc}")
            except Exception as exc:  # a node's bug must not take the connection down
                log.exception("node %r crashed calling %r", node, tool.name)
                return error_result(f"tool {tool.name!r} (node {node!r}) failed: {exc!r}")

        if not asks:
            # Nothing to ask our client: no round to park the call across.
            context = CallContext(on_progress=ctx.session.report_progress, meta=hop_meta(ctx))
            return answered(await work(context), ctx.protocol_version, _from_server(tool))
        try:
            outcome = await for_client(ctx, params, work)
        except MCPError as exc:  # a retry whose parked call is gone
            return error_result(exc.error.message)
        if isinstance(outcome, types.InputRequiredResult):
            return outcome
        # A retry continues the parked call its state names, whoever began it: one that was
        # passed through in its first round ends with its server's JSON.
        return answered(call_result(outcome), ctx.protocol_version, _from_server(tool))


def _own_names(listed: Mapping[str, Tool]) -> dict[str, str]:
    owners = Counter(tool.original_name or name for name, tool in listed.items())
    return {
        tool.original_name: name
        for name, tool in listed.items()
        if tool.original_name not in (None, name) and owners[tool.original_name] == 1
    }


def answered(
    result: types.CallToolResult, protocol_version: str, from_server: bool = False
) -> types.CallToolResult:
    """The node's result as this client receives it (`fit_to_era`; an MCP server's as it sent
    it, `from_server`); raises the server's JSON-RPC error where the result stands for one, for
    the client to get it as sent (`relayed_error`)."""
    error = relayed_error(protocol_error(result), protocol_version)
    if error is not None:
        raise MCPError.from_error_data(error)
    result = fit_to_era(result, protocol_version)
    return _as_sent(result) if from_server else result


def _from_server(tool: Tool) -> bool:
    """Whether `tool` is an MCP server's (which has its own definition)."""
    return tool.definition is not None


def fit_to_era(result: types.CallToolResult, protocol_version: str) -> types.CallToolResult:
    """The node's result as this client may receive it (see the module docstring)."""
    result = without_stamp(result)
    structured = result.structured_content
    if (
        protocol_version not in MODERN_PROTOCOL_VERSIONS
        and structured is not None
        and not isinstance(structured, dict)
    ):
        return result.model_copy(update={"structured_content": None})
    return result


def _as_sent(result: types.CallToolResult) -> types.CallToolResult:
    """A server's result dumped as it came: with no `isError` if the server sent none."""
    if "is_error" in result.model_fields_set or type(result) is not types.CallToolResult:
        return result
    return _AsSent.model_construct(result.model_fields_set, **dict(result))


class _AsSent(types.CallToolResult):
    """A result whose server sent no `isError`, dumped without one: the model's default
    (false) would otherwise add it."""

    @model_serializer(mode="wrap")
    def _as_sent(self, dump: SerializerFunctionWrapHandler) -> dict[str, Any]:
        fields: dict[str, Any] = dump(self)
        fields.pop("isError", None)
        fields.pop("is_error", None)
        return fields


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
