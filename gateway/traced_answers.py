"""Tool spans for the calls an agent answered itself, not dispatched: an unknown tool, bad
arguments, a repeated call. Each is closed at once with what the model was told."""

from __future__ import annotations

from pydantic import JsonValue

from agent import EngineRequest
from agent.scratchpad import ERROR_PREFIX

from .trace import Tracer

__all__ = ["trace_answered"]


async def trace_answered(tracer: Tracer, parent_id: str, request: EngineRequest) -> None:
    """A tool span for each call the agent answered itself (an unknown tool, bad arguments, a
    repeated call), closed at once with what the model was told."""
    if not tracer.hooks:
        return
    metadata = request.metadata
    running = {action.tool_call_id for action in request.actions}
    for index, message in metadata.pending.items():
        steps = {step.tool_call_id: step for step in metadata.previous_steps.get(index, ())}
        for call in message.tool_calls:
            step = steps.get(call.id)
            if step is None or call.id in running:
                continue
            said: JsonValue = (
                call.arguments if call.invalid_arguments is None else call.invalid_arguments
            )
            async with tracer.span(
                "tool", call.name, parent_id=parent_id, input=said, call_id=call.id
            ) as span:
                if step.observation.startswith(ERROR_PREFIX):
                    # Bad arguments are quoted in what the model is told.
                    private = call.invalid_arguments is not None
                    span.fail(step.observation.removeprefix(ERROR_PREFIX), private=private)
                else:
                    span.output = step.observation
