"""A gateway's nodes and agents by name: each name one node or one agent.

The model calls tools by name and an agent's `tools` name its nodes and agents, so two of one
name would leave one unreachable, or send one's calls to the other, without a word. A config
refuses that when it loads; a `Gateway` built in code (`[*group.nodes, FunctionToolkit(...)]`,
say) is refused so when it is made.
"""

from __future__ import annotations

from collections.abc import Iterable

from toolkits import Toolkit

from .agent_spec import AgentSpec
from .errors import ConfigError

__all__ = ["by_name"]


def by_name(
    nodes: Iterable[Toolkit], agents: Iterable[AgentSpec]
) -> tuple[dict[str, Toolkit], dict[str, AgentSpec]]:
    """The nodes and the agents, each by its name. Raises `ConfigError` for a name used twice
    (two nodes, two agents, or an agent and a node) and for a handoff to no agent."""
    named_nodes: dict[str, Toolkit] = {}
    for node in nodes:
        if node.name in named_nodes:
            raise ConfigError(f"node {node.name!r}: the name is already used by another node")
        named_nodes[node.name] = node
    named_agents: dict[str, AgentSpec] = {}
    for spec in agents:
        if spec.name in named_nodes:
            raise ConfigError(f"agent {spec.name!r}: the name is already used by a node")
        if spec.name in named_agents:
            raise ConfigError(f"agent {spec.name!r}: the name is already used by another agent")
        named_agents[spec.name] = spec
    for spec in named_agents.values():
        not_agents = [name for name in spec.handoffs if name not in named_agents]
        if not_agents:  # only an agent of this gateway can take a conversation over
            raise ConfigError(f"agent {spec.name!r} hands off to no agent: {not_agents}")
    return named_nodes, named_agents
