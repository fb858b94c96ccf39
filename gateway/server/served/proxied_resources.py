"""Proxy mode: the exposed MCP nodes' resources and resource templates, served as one set.

Resources keep their URIs and templates their URI templates: a client reads the same URI the
server listed. Reads are routed back to a node:

1. when only one node is exposed, by that node, unlisted (a server may serve URIs it does
   not list, and one that does not answer would make a read wait for its listings first);
2. by the URI map built from the last listing (listed again when the URI is not in it);
3. else by the first node (in config order) with a template that matches the URI;
   otherwise the read is refused with an MCP error, which names the nodes that could not
   list (the URI may be theirs).

On a clash the first node in config order wins and a warning is logged: a URI two nodes list
is served and read from the first; so is a template two nodes list. Reads are relayed intact
(only the downstream's `serverInfo` stamp is dropped), and the server's requests during a read
go to our client (`client_requests.ask_client`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NoReturn

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from toolkits import CallContext, HasCatalog

from ...catalog import LeftOut, Routes, claim, echoed, list_each
from ..client_requests.ask_client import proxy_request

__all__ = ["ProxiedResources"]

log = logging.getLogger(__name__)


class ProxiedResources:
    """The resources and resource templates of the exposed MCP nodes."""

    def __init__(self, nodes: Sequence[HasCatalog]) -> None:
        self._nodes = list(nodes)
        self._by_uri = Routes[HasCatalog](self._list_both)
        self._by_template = Routes[HasCatalog](self._list_templates)
        self._matchers: list[tuple[UriTemplate, HasCatalog]] = []
        self._warned: set[str] = set()
        """The clashes warned of: each once, not at every listing."""
        self._resources_left_out = LeftOut("resources")
        self._templates_left_out = LeftOut("resource templates")

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=await self._list_resources())

    async def list_templates(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=await self._list_templates())

    async def read(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        node = await self.route(params.uri)

        async def read(context: CallContext) -> types.ReadResourceResult:
            return await node.catalog.read_resource(params.uri, context=context)

        return await proxy_request(ctx, params, node.name, read)

    async def route(self, uri: str) -> HasCatalog:
        """The node serving `uri` (see the module docstring). Raises `MCPError`."""
        if len(self._nodes) == 1:
            return self._nodes[0]
        node = self._match(uri)
        if node is None:
            # A client may read without listing, or the servers' lists may have changed.
            await self._list_both()
            node = self._match(uri)
        if node is None:
            self._refuse(uri, "resource", self._resources_left_out, self._templates_left_out)
        return node

    async def route_template(self, uri_template: str) -> HasCatalog:
        """The node listing the template `uri_template` (completions name templates so).

        Else the node a resource URI given instead routes to. Raises `MCPError`.
        """
        if len(self._nodes) == 1:
            return self._nodes[0]
        node = await self._by_template.find(uri_template) or self._match(uri_template)
        if node is None:
            self._refuse(uri_template, "template", self._templates_left_out)
        return node

    @staticmethod
    def _refuse(uri: str, what: str, *left_outs: LeftOut) -> NoReturn:
        for left_out in left_outs:
            unlisted = left_out.unlisted(uri, what)
            if unlisted is not None:  # the server's outage, not the client's mistake
                raise MCPError(types.INTERNAL_ERROR, unlisted)
        raise MCPError(types.INVALID_PARAMS, f"no proxied server offers the {what} {echoed(uri)}")

    def _match(self, uri: str) -> HasCatalog | None:
        node = self._by_uri.get(uri)
        if node is not None:
            return node
        for template, owner in self._matchers:
            if template.match(uri) is not None:
                return owner
        return None

    async def _list_both(self) -> None:
        async with anyio.create_task_group() as tg:  # a server that does not answer: one wait
            tg.start_soon(self._list_resources)
            tg.start_soon(self._list_templates)

    async def _list_resources(self) -> list[types.Resource]:
        listed = await list_each(
            self._nodes, lambda n: n.catalog.list_resources(), left_out=self._resources_left_out
        )
        routes: dict[str, HasCatalog] = {}
        served: list[types.Resource] = []
        for node, resources in listed:
            for resource in resources:
                if claim(
                    routes, resource.uri, node, node_of=_name, what="resource", warned=self._warned
                ):
                    served.append(resource)
        self._by_uri.update(routes)
        return served

    async def _list_templates(self) -> list[types.ResourceTemplate]:
        listed = await list_each(
            self._nodes,
            lambda n: n.catalog.list_resource_templates(),
            left_out=self._templates_left_out,
        )
        routes: dict[str, HasCatalog] = {}
        matchers: list[tuple[UriTemplate, HasCatalog]] = []
        served: list[types.ResourceTemplate] = []
        for node, templates in listed:
            for template in templates:
                uri_template = template.uri_template
                if not claim(
                    routes,
                    uri_template,
                    node,
                    node_of=_name,
                    what="resource template",
                    warned=self._warned,
                ):
                    continue
                served.append(template)
                try:
                    matchers.append((UriTemplate.parse(uri_template), node))
                except InvalidUriTemplate as exc:
                    log.warning(
                        "node %r: cannot route reads by its template %r (%s); listed all the same",
                        node.name,
                        uri_template,
                        exc,
                    )
        self._by_template.update(routes)
        self._matchers = matchers
        return served


def _name(node: HasCatalog) -> str:
    return node.name
