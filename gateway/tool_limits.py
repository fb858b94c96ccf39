"""Agents that offer their model more tools than its provider takes in one request.

Said, never enforced: the provider refuses such a request itself (OpenAI: a 400, "array too
long"), and a limit may change before this code does. Said where it helps most: `tools` and
`serve` at start, and a run when its agent is first given its tools.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from agent import ChatModel, LimitsTools
from agent.models import FallbackModel

if TYPE_CHECKING:
    from .engine import AgentSpec, Gateway

__all__ = ["max_tools", "too_many_tools", "tools_offered"]


async def tools_offered(gateway: Gateway, spec: AgentSpec) -> int:
    """How many tools `spec`'s model is offered now: its nodes' tools, and with an output
    schema the answer's own tool."""
    return len(await gateway.tools_for(spec)) + (spec.options.output is not None)


def max_tools(model: ChatModel) -> int | None:
    """The fewest tools one of the models a call may go to (`model`, or each of a fallback
    list) takes in one request; None if none of them documents a limit."""
    return min((limit for _, limit in _limits(model)), default=None)


def too_many_tools(agent: str, model: ChatModel, count: int) -> str | None:
    """What to tell of an agent that offers `count` tools to `model`; None if they fit."""
    over = [(name, limit) for name, limit in _limits(model) if count > limit]
    if not over:
        return None
    limits = "; ".join(f"{name} takes at most {limit}" for name, limit in over)
    return (
        f"agent {agent!r} offers its model {count} tools, more than its provider takes in one "
        f"request ({limits}): that provider will refuse its calls. Give the agent fewer tools "
        "(a server's include/exclude, or fewer servers)"
    )


def _limits(model: ChatModel) -> list[tuple[str, int]]:
    """Each model a call may go to whose provider documents a limit: its name and limit."""
    models: Sequence[ChatModel] = model.models if isinstance(model, FallbackModel) else [model]
    return [
        (each.name, limit)
        for each in models
        if isinstance(each, LimitsTools) and (limit := each.max_tools) is not None
    ]
