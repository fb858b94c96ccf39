"""What an agent is told of its tools: each listed tool as a `ToolDefinition`, an agent it may
hand the conversation to as a handoff (`ToolDefinition.hands_off`), made once per listing."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from agent import ToolDefinition
from agent.models.schema import unexpressed
from toolkits import Tool

from .agent_tool import HANDOFF_ALONE_INPUT_SCHEMA, HANDOFF_INPUT_SCHEMA, handoff_description

log = logging.getLogger(__name__)

__all__ = ["ToolDefinitions", "tool_definition"]


class ToolDefinitions:
    """Each agent's tool definitions, by tool name, with the listed tool each was made from:
    made again only for a tool listed anew (100 of them took ~1 ms a run)."""

    def __init__(self) -> None:
        self._defined: dict[str, dict[str, tuple[Tool, ToolDefinition]]] = {}

    def of(
        self,
        agent: str,
        tools: Mapping[str, Tool],
        handoffs: Collection[str] = (),
        *,
        handoff_history: bool = True,
    ) -> list[ToolDefinition]:
        """`agent`'s definitions of `tools`; those of the agents named in `handoffs` (by node
        name) hand off, with or without the conversation (`handoff_history`); an agent's
        handoffs are fixed: the cache holds."""
        kept = self._defined.get(agent, {})
        fresh: dict[str, tuple[Tool, ToolDefinition]] = {}
        for name, tool in tools.items():
            made = kept.get(name)
            if made is None or made[0] is not tool:
                hands_off = tool.source_node in handoffs
                definition = tool_definition(tool, hands_off=hands_off, history=handoff_history)
                made = (tool, definition)
                _warn_unexpressed(agent, made[1])
            fresh[name] = made
        self._defined[agent] = fresh  # only the tools listed now: none kept past their time
        return [definition for _, definition in fresh.values()]


def tool_definition(tool: Tool, *, hands_off: bool = False, history: bool = True) -> ToolDefinition:
    """What the agent is told of a node's tool. For an engine of one's own: the agent's
    actions name `tool.source_node`, and a toolkit node's input also names the tool
    (`agent.ROUTING_KEY`): `Action.arguments` gives the tool's own for `call_tool`.
    `hands_off`: the tool is an agent taking the conversation over, described as such and
    asked with `HANDOFF_INPUT_SCHEMA` (`history`: the conversation goes along), or
    `HANDOFF_ALONE_INPUT_SCHEMA`."""
    handoff_schema = HANDOFF_INPUT_SCHEMA if history else HANDOFF_ALONE_INPUT_SCHEMA
    schema: dict[str, Any] = dict(handoff_schema if hands_off else tool.input_schema)
    return ToolDefinition(
        name=tool.name,
        description=handoff_description(tool.name, tool.description, with_history=history)
        if hands_off
        else tool.description,
        input_schema=schema,
        source_node=tool.source_node,
        is_from_toolkit=tool.is_from_toolkit,
        hands_off=hands_off,
    )


def _warn_unexpressed(agent: str, tool: ToolDefinition) -> None:
    """Say, before the model is first called, what a tool's schema asks that no model can be
    told: the model is offered the tool without it, and the tool's own check answers calls
    that miss it."""
    lost = unexpressed(tool.input_schema)
    if lost:
        log.warning(
            "agent %r: tool %r: its input schema cannot be told to a model whole: %s; "
            "the model is offered the tool without it",
            agent,
            tool.name,
            "; ".join(lost),
        )
