"""What the gateway offers its clients besides tools: its handshake's capabilities
(2025-11-25 `initialize`, 2026-07-28 `server/discover`) and the requests it answers.

    prompts, resources        an exposed MCP server offers them
    resources.subscribe       an exposed server offers resource subscriptions
    completions               an exposed server offers them (the gateway completes nothing
                              of its own: its agents are tools, not prompts)
    logging                   agents are served (their runs log each model and tool call),
                              or an exposed server offers logging (its messages are relayed)

A server counts by what it said on its last session, kept while it reconnects; one never
connected yet counts for nothing, one whose capabilities are unknown (`protocol = "modern"`:
no discovery) for everything, as the catalog asks it and takes "Method not found" for no.
Read at each handshake, as the instructions are (`instructions`), and at each request: one
for what is not offered now gets -32601 "Method not found", as the server connected directly
answers it, in both eras.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolkits import HasCatalog

__all__ = ["Offered"]

Feature = Literal["prompts", "resources", "subscribe", "completions", "logging"]

_FEATURE_OF: dict[str, Feature] = {
    "prompts/list": "prompts",
    "prompts/get": "prompts",
    "resources/list": "resources",
    "resources/templates/list": "resources",
    "resources/read": "resources",
    "resources/subscribe": "subscribe",
    "resources/unsubscribe": "subscribe",
    "completion/complete": "completions",
    "logging/setLevel": "logging",
}


class Offered:
    """What the gateway offers now (see the module)."""

    def __init__(self, *, agents: bool, nodes: Sequence[HasCatalog]) -> None:
        """`agents`: agents are served; `nodes`: the exposed MCP servers."""
        self._agents = agents
        self._nodes = nodes

    def offers(self, feature: Feature) -> bool:
        if feature == "logging" and self._agents:
            return True
        return any(_offered(node.catalog.capabilities, feature) for node in self._nodes)

    def fit(self, capabilities: types.ServerCapabilities) -> types.ServerCapabilities:
        """`capabilities` (the SDK's, from the handlers registered) less what is not offered
        now, `resources.subscribe` as offered."""
        update: dict[str, Any] = {}
        for feature in ("prompts", "resources", "completions", "logging"):
            if getattr(capabilities, feature) is not None and not self.offers(feature):
                update[feature] = None
        resources = capabilities.resources
        if resources is not None and "resources" not in update:
            update["resources"] = resources.model_copy(
                update={"subscribe": self.offers("subscribe")}
            )
        return capabilities.model_copy(update=update)

    async def middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Refuses a request for what is not offered now, as an unknown method."""
        feature = _FEATURE_OF.get(ctx.method)
        if feature is not None and not self.offers(feature):
            raise MCPError(types.METHOD_NOT_FOUND, "Method not found", ctx.method)
        return await call_next(ctx)


def _offered(capabilities: types.ServerCapabilities | None, feature: Feature) -> bool:
    if capabilities is None:
        return False  # never connected: nothing is known of it yet
    if capabilities == types.ServerCapabilities():
        return True  # unknown (no discovery): it may offer anything
    if feature == "subscribe":
        return capabilities.resources is not None and bool(capabilities.resources.subscribe)
    return getattr(capabilities, feature) is not None
