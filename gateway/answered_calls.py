"""The calls an agent answered itself, without the engine (an unknown tool, arguments that are
not a JSON object, a repeat not run again, a handoff not made): a tool span each, closed at
once with what the model was told, and a record in the run's journal beside the calls the
engine made, so a stored run shows them (`runs show`) as the trace and `run --json` do.

A record is the `ActionResponse` a made call's is, its action to no node, with `answered`
set, and as input what the model wrote (its text, for arguments that were not JSON).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import JsonValue

from agent import Action, ActionResponse, EngineRequest, ToolCall, ToolCallStep
from agent.scratchpad import ERROR_PREFIX, REPEAT_NOTICE

from .journal import ScopedJournal
from .trace import Tracer

__all__ = ["AnsweredCall", "answered_calls", "tell_answered"]


@dataclass(frozen=True, slots=True)
class AnsweredCall:
    item: int
    call: ToolCall
    step: ToolCallStep

    @property
    def said(self) -> JsonValue:
        """The call's arguments as the model wrote them."""
        call = self.call
        return call.arguments if call.invalid_arguments is None else call.invalid_arguments

    @property
    def error(self) -> str | None:
        """What the model was told, if it was told of a failure."""
        told = self.step.observation
        return told.removeprefix(ERROR_PREFIX) if told.startswith(ERROR_PREFIX) else None

    def record(self) -> JsonValue:
        action = Action(
            node="",
            input=self.call.arguments,
            tool_call_id=self.call.id,
            item_index=self.item,
            tool=self.call.name,
        )
        error = self.error
        told = ActionResponse(
            action=action, data=self.step.observation if error is None else None, error=error
        )
        shown: dict[str, Any] = told.model_dump(mode="json", exclude={"media"})
        shown["action"]["input"] = self.said
        return {**shown, "answered": True}


def answered_calls(request: EngineRequest) -> list[AnsweredCall]:
    """The calls of `request`'s answers that the agent answered itself, in their order."""
    metadata = request.metadata
    running = {(action.item_index, action.tool_call_id) for action in request.actions}
    found: list[AnsweredCall] = []
    for index, message in metadata.pending.items():
        steps = {step.tool_call_id: step for step in metadata.previous_steps.get(index, ())}
        for call in message.tool_calls:
            step = steps.get(call.id)
            if step is not None and (index, call.id) not in running:
                found.append(AnsweredCall(index, call, step))
    return found


async def tell_answered(
    tracer: Tracer, journal: ScopedJournal | None, parent_id: str, request: EngineRequest
) -> None:
    """A span and a record (with a `journal`) for each call the agent answered itself."""
    for one in answered_calls(request):
        if tracer.hooks:
            async with tracer.span(
                "tool", one.call.name, parent_id=parent_id, input=one.said, call_id=one.call.id
            ) as span:
                error = one.error
                if error is not None:
                    # Bad arguments are quoted in what the model is told, and so is the
                    # earlier result of a call repeated too often (a tool's own words).
                    quoted = one.call.invalid_arguments is not None
                    span.fail(error, private=quoted or error.startswith(REPEAT_NOTICE))
                else:
                    span.output = one.step.observation
        if journal is not None:
            record = one.record()

            async def recorded(record: JsonValue = record) -> JsonValue:
                return record

            await journal.record(f"tool {one.item} {one.call.id}", recorded)
