"""Agents' `require_approval` globs that match none of their tools, warned of.

A misspelt glob (`crm__delet_*`) would leave the tool it meant ungated, and nothing else
would say so: as a server's `include` and `require_approval` globs are checked against its
listing, an agent's are checked against the tools of its nodes (every name a rule matches,
`approval_names`), once the gateway is up and again whenever one of those nodes' tools change;
each agent's unmatched globs are warned of once for each change of what is unmatched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from toolkits import HasHealth, ListsAtHand
from toolkits.mcp.naming import globs_unmatched, unmatched_globs

from .approval import approval_names
from .engine import AgentSpec, Gateway

__all__ = ["UnmatchedApprovals"]

log = logging.getLogger(__name__)


class UnmatchedApprovals:
    """Checks the agents' approval globs of one gateway (`check`, `node_changed`)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._said: dict[str, tuple[str, ...]] = {}
        """Each agent's globs last found unmatched (and warned of, if any)."""

    def check(self, agents: Iterable[str] | None = None) -> None:
        """Warn of the named agents' (default: all) globs that match none of their tools,
        unless that was said already. An agent with a node still making its first
        connection waits for it (its tools are not known yet)."""
        for name in self._gateway.agents if agents is None else agents:
            spec = self._gateway.agents[name]
            if spec.approval.tools:
                self._check(spec)

    async def node_changed(self, node: str) -> None:
        """A node's tools changed: check the agents that use it (`subscribe` callback)."""
        self.check(name for name, spec in self._gateway.agents.items() if node in spec.tools)

    def _check(self, spec: AgentSpec) -> None:
        offered: list[str] = []
        matched: list[str] = []
        absent: list[str] = []
        for name in spec.tools:
            node = self._gateway.nodes.get(name)
            if node is None:  # an agent: its one tool has its name
                offered.append(name)
                matched.append(name)
                continue
            if not isinstance(node, ListsAtHand):  # cannot tell its tools without waiting
                absent.append(name)
                continue
            health = node.health if isinstance(node, HasHealth) else None
            if health is not None and health.state == "connecting":
                return  # checked when it lists its tools (or gives up)
            tools = node.tools_at_hand() or ()
            if not tools and health is not None and health.state != "ready":
                absent.append(name)
            offered.extend(tool.name for tool in tools)
            matched.extend(form for tool in tools for form in approval_names(tool))
        unmatched = unmatched_globs(spec.approval.tools, matched)
        if unmatched == self._said.get(spec.name, ()):
            return
        self._said[spec.name] = unmatched
        if not unmatched:
            return
        said = globs_unmatched("require_approval", unmatched, offered, of="the agent")
        them = "it" if len(unmatched) == 1 else "them"
        down = f" (servers without tools now, not counted: {', '.join(absent)})" if absent else ""
        log.warning("agent %r: %s, so no call is gated by %s%s", spec.name, said, them, down)
