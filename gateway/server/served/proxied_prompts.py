"""Proxy mode: the exposed MCP nodes' prompts, and completions for prompts and templates.

Prompts are named like tools, by each node's prefix policy (`toolkits.mcp.naming`: `always`
gives `node__prompt`, `auto` prefixes only a name two exposed nodes share, `never` keeps the
bare name) and routed back through the reverse map, never by splitting names. `prompts/get`
results are relayed intact (only the downstream's `serverInfo` stamp is dropped), and the
server's requests while it renders the prompt go to our client (`client_requests.ask_client`).

A completion request is routed by its reference: a prompt by the name we serve it under (sent
on under the server's own name), a resource template by its URI template (`proxied_resources`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolkits import CallContext, HasCatalog, ToolkitError
from toolkits.mcp import NodeTools, resolve_tool_names

from ...catalog import LeftOut, Routes, list_each
from ..client_requests.ask_client import proxy_request
from .proxied_resources import ProxiedResources
from .relaying import as_mcp_error, without_stamp

__all__ = ["ProxiedPrompts", "completions"]

log = logging.getLogger(__name__)


class ProxiedPrompts:
    """The prompts of the exposed MCP nodes, under names unique across them."""

    def __init__(self, nodes: Sequence[HasCatalog]) -> None:
        self._nodes = list(nodes)
        self._routes = Routes[tuple[HasCatalog, str]](self._listing)
        self._warned: set[tuple[str, ...]] = set()
        """The clashes warned of: each once, not at every listing."""
        self._left_out = LeftOut("prompts")

    async def list_prompts(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=await self._listing())

    async def get_prompt(
        self, ctx: ServerRequestContext[Any, Any], params: types.GetPromptRequestParams
    ) -> types.GetPromptResult | types.InputRequiredResult:
        node, original = await self.route(params.name)

        async def get(context: CallContext) -> types.GetPromptResult:
            return await node.catalog.get_prompt(original, params.arguments, context=context)

        return await proxy_request(ctx, params, node.name, get)

    async def route(self, name: str) -> tuple[HasCatalog, str]:
        """The node serving the prompt we call `name`, and its own name. Raises `MCPError`."""
        found = await self._routes.find(name)
        if found is None:
            unlisted = self._left_out.unlisted(name, "prompt")
            if unlisted is not None:  # the server's outage, not the client's mistake
                raise MCPError(types.INTERNAL_ERROR, unlisted)
            raise MCPError(types.INVALID_PARAMS, self._routes.unknown(name, "prompt"))
        return found

    async def _listing(self) -> list[types.Prompt]:
        listed = await list_each(
            self._nodes, lambda n: n.catalog.list_prompts(), left_out=self._left_out
        )
        offered: list[tuple[HasCatalog, dict[str, types.Prompt]]] = []
        for node, prompts in listed:
            unique: dict[str, types.Prompt] = {}
            for prompt in prompts:
                if unique.setdefault(prompt.name, prompt) is not prompt:
                    log.warning(
                        "node %r lists prompt %r twice; serving the first", node.name, prompt.name
                    )
            offered.append((node, unique))
        # Named like tools: unique across the nodes by their prefix policies, never clashing.
        names = resolve_tool_names(
            [NodeTools(node.name, node.prefix, tuple(prompts)) for node, prompts in offered],
            what="prompt",
            warned=self._warned,  # listed again at every prompts/list
        )
        routes: dict[str, tuple[HasCatalog, str]] = {}
        served: list[types.Prompt] = []
        for node, prompts in offered:
            for original, prompt in prompts.items():
                name = names[node.name][original]
                routes[name] = (node, original)
                served.append(prompt.model_copy(update={"name": name}))
        self._routes.update(routes)
        return served


CompletionHandler = Callable[
    [ServerRequestContext[Any, Any], types.CompleteRequestParams], Awaitable[types.CompleteResult]
]


def completions(prompts: ProxiedPrompts, resources: ProxiedResources) -> CompletionHandler:
    """The `completion/complete` handler over the proxied prompts and templates."""

    async def complete(
        ctx: ServerRequestContext[Any, Any], params: types.CompleteRequestParams
    ) -> types.CompleteResult:
        ref = params.ref
        if isinstance(ref, types.PromptReference):
            node, original = await prompts.route(ref.name)
            ref = ref.model_copy(update={"name": original})
        else:
            node = await resources.route_template(ref.uri)
        context = params.context.arguments if params.context is not None else None
        try:
            result = await node.catalog.complete(ref, params.argument, context)
        except ToolkitError as exc:
            raise as_mcp_error(node.name, exc) from exc
        return without_stamp(result)

    return complete
