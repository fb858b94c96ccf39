"""The `instructions` a client reads at its handshake (2025-era `initialize`, 2026-07-28
`server/discover`): the gateway's own words on its agents, and what each exposed MCP server
tells its clients, which a client such as Claude puts before its model as the server's own.

Read when a client connects (over HTTP at each handshake; over stdio as the connection
begins), so a server that connects later is in the next client's; one down then is left out. One exposed server and no agents: its words as it wrote them, as a
direct connection gets them (with `prefix = "always"`, headed by the names its tools have
here). Several: one section each, headed by the server's name.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolkits import HasCatalog

__all__ = ["AGENTS", "EXPOSED", "ServedInstructions"]

AGENTS = (
    "Each agent is a tool: call it with `prompt` (the question or task) and it answers, using "
    "its own tools. Optional: `session_id` continues the conversation kept under that id, and "
    "`context` gives facts for the run (an object). Instead of `prompt`, `items` (a list of "
    "{prompt, session_id?, context?}) asks many questions in one call, each answered on its "
    "own."
)
EXPOSED = "The other tools are served as the servers and toolkits behind this gateway offer them."
"""Said only when tools of the gateway's nodes are served beside the agents: a client such as
Claude puts these words before its model, which would look for tools that are not there."""


class ServedInstructions:
    """What the gateway says at each handshake (see the module)."""

    def __init__(self, *, agents: bool, exposed: bool, nodes: Sequence[HasCatalog]) -> None:
        """`agents`: agents are served (the gateway's words on them come first); `exposed`:
        nodes' tools are served too; `nodes`: the exposed MCP servers, in the config's order."""
        self._agents = None if not agents else f"{AGENTS} {EXPOSED}" if exposed else AGENTS
        self._nodes = nodes

    def __call__(self) -> str | None:
        told = [(node, text) for node in self._nodes if (text := _said(node))]
        if self._agents is None and len(told) == 1:
            node, text = told[0]
            return text if node.prefix != "always" else f"{_named(node)}\n\n{text}"
        parts = [self._agents] if self._agents is not None else []
        parts += [f"## {node.name}\n\n{_named(node)}\n\n{text.strip()}" for node, text in told]
        return "\n\n".join(parts) or None


def _said(node: HasCatalog) -> str | None:
    text = node.catalog.instructions
    return text if text is not None and text.strip() else None


def _named(node: HasCatalog) -> str:
    """How the server's tools and prompts are named here, which its words cannot know."""
    if node.prefix == "always":
        return (
            f"(The MCP server '{node.name}': its tools and prompts are named here "
            f"`{node.name}__NAME`.)"
        )
    return (
        f"(The MCP server '{node.name}': a tool or prompt of it may be named here "
        f"`{node.name}__NAME`, when another server offers the same name.)"
    )
