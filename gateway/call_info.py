"""A run's context (a JSON object its caller gives), on its items and in its tools' calls.

The caller gives it once for the run (`Gateway.run(context=...)`, `run --context`, a served
agent's `context` argument) or per item; an item's own wins whole (no merge). It is stored with
the items, so a run resumed later has it, and an agent run as a tool inherits its calling
item's. Local tools read it, with who and what the call is for, from a `toolkits.CallInfo`
the gateway fills per call (`info_for`); MCP servers are not sent it, but a trusted server's
tools that take a `context` object (an agent another gateway serves) are, with
`forward_context` (`toolkits.mcp.context_argument`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from pydantic import JsonValue

from agent import Action, AgentItem
from toolkits import CallInfo

from .run_context import RunContext
from .run_state import RunState

__all__ = ["info_for", "sub_item", "with_context"]


def with_context(
    items: Sequence[AgentItem], context: Mapping[str, JsonValue] | None
) -> list[AgentItem]:
    """`items`, each without a context of its own given `context`. Raises `ValueError`
    (pydantic's `ValidationError`) for a context that is not a JSON object."""
    if context is None:
        return list(items)
    return [
        item
        if item.context is not None
        else AgentItem(prompt=item.prompt, session_id=item.session_id, context=dict(context))
        for item in items
    ]


def info_for(context: RunContext, state: RunState, action: Action) -> CallInfo:
    """What a local tool called by `action` of the current agent (whose run is `state`) is
    told."""
    item = state.items[action.item_index]
    return CallInfo(
        run_id=context.tracer.run_id,
        agent=context.chain[-1] if context.chain else None,
        session_id=item.session_id,
        subject=context.tracer.subject,
        context=copy.deepcopy(item.context) if item.context else {},  # the tool's own
        tool_call_id=action.tool_call_id,
        item=context.item_of(action.item_index),
    )


def sub_item(prompt: str, state: RunState, action: Action) -> AgentItem:
    """The one item of the agent that `action` (of the run `state`) runs as a tool: its
    calling item's context is its own too."""
    return AgentItem(prompt=prompt, context=state.items[action.item_index].context)
