"""How many node calls run at once: per node for everyone, and per client for each node.

A node (an MCP server, a set of local functions) takes at most its own limit of calls at once,
whoever makes them, so no server is flooded. Within that, each client (an MCP client
connection, or one run started from the command line) has a quota per node: its calls beyond
it wait in that client's own queue, so one client with many hung calls never delays another
client, and a call to one node never waits for calls to another (a local tool never waits
behind a slow server). Waiting is first come, first served at both levels.
"""

from __future__ import annotations

from collections.abc import Mapping

import anyio

__all__ = ["DEFAULT_CLIENT_LIMIT", "DEFAULT_NODE_LIMIT", "PerNode"]

DEFAULT_CLIENT_LIMIT = 16
"""Calls one client may have in flight on one node."""
DEFAULT_NODE_LIMIT = 64
"""Calls one node takes at once, across all clients."""


class PerNode:
    """A first-come-first-served limiter per node, made on first use.

    A client's quota is one (`PerNode(client_limit)`); the nodes' own limits are another.
    """

    def __init__(self, default: int, limits: Mapping[str, int] | None = None) -> None:
        self._default = default
        self._limits = dict(limits or {})
        self._by_node: dict[str, anyio.Semaphore] = {}

    def limiter(self, node: str) -> anyio.Semaphore:
        limiter = self._by_node.get(node)
        if limiter is None:
            capacity = self._limits.get(node, self._default)
            # A call always waits on its node before it lets go of the limit: a free slot can
            # be taken without the extra trip through the event loop (a CapacityLimiter's).
            limiter = anyio.Semaphore(capacity, fast_acquire=True)
            self._by_node[node] = limiter
        return limiter
