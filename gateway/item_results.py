"""What a run's items came to, as its result and its trace tell it: each item's answer or
error, an empty final answer as the item's failure, each item's end told as it comes, and its
tool calls (steps) as JSON, in the one form `run --json` and a served agent's result share."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from agent import AssistantMessage, ItemResult, ToolCallStep

from .trace import Tracer

__all__ = [
    "EMPTY_ANSWER",
    "STEP_SCHEMA",
    "FinishedItems",
    "empty_failed",
    "handed_off_to",
    "outputs",
    "steps_json",
    "text_before_calls",
]

EMPTY_ANSWER = "the model's final answer was empty"


def text_before_calls(steps: Sequence[ToolCallStep]) -> str:
    """The text the item's model answers wrote beside their tool calls ("Let me look that
    up."), a blank line between two answers', as a streamed answer sends it: what an item
    stopped before its answer had said."""
    texts: list[str] = []
    last: AssistantMessage | None = None
    for step in steps:
        if step.message != last and step.message.content.strip():
            texts.append(step.message.content)
        last = step.message
    return "\n\n".join(texts)


def outputs(items: Sequence[ItemResult]) -> JsonValue:
    """The items' answers or errors, as a run's or an agent's trace output."""
    return [
        {"output": item.output} if item.error is None else {"error": item.error} for item in items
    ]


STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "call_id": {"type": "string"},
        "tool": {"type": "string"},
        "input": {"type": "object"},
        "observation": {"type": "string"},
    },
}
"""One of `steps_json`."""


def steps_json(steps: Sequence[ToolCallStep]) -> list[dict[str, JsonValue]]:
    """Each tool call as `{call_id, tool, input, observation}`: the words `runs show --json`
    (`call_id`, `input`) and a waiting call (`tool`, `input`) use too."""
    return [
        {
            "call_id": step.tool_call_id,
            "tool": step.tool,
            "input": step.tool_input,
            "observation": step.observation,
        }
        for step in steps
    ]


def empty_failed(item: ItemResult) -> ItemResult:
    """`item`, failed with `EMPTY_ANSWER` if it answered nothing (no error, no text); else
    `item` itself."""
    if item.error is None and not (item.output or "").strip():
        return item.model_copy(update={"error": EMPTY_ANSWER, "output": None})
    return item


def handed_off_to(output: JsonValue) -> str | None:
    """The agent an item was handed to, from a trace note's `output` (`FinishedItems`)."""
    handed = output.get("handed_off_to") if isinstance(output, dict) else None
    return handed if isinstance(handed, str) else None


class FinishedItems:
    """Tells the trace of each of a run's many items as it finishes (`Tracer.item_finished`),
    once; a single question's end is its run's. Of any item answered by a handoff, a note
    says to whom it was handed (`handed_off_to`), as it finishes."""

    def __init__(self, tracer: Tracer, agent: str, span_id: str, count: int) -> None:
        self._tracer = tracer
        self._agent = agent
        self._span_id = span_id
        self._many = count > 1
        self._told: set[int] = set()

    async def tell(self, finished: Mapping[int, ItemResult]) -> None:
        if not self._tracer.hooks:
            return
        for index in sorted(finished.keys() - self._told):
            self._told.add(index)
            # An empty answer is the item's failure here already, as in the run's result.
            item = empty_failed(finished[index])
            if item.handoff is not None and item.error is None:
                await self._tracer.note(
                    "agent", self._agent, self._span_id, handed_off_to=item.handoff, item=index
                )
            if self._many:
                await self._tracer.item_finished(self._agent, self._span_id, index, item)
