"""Answers that stopped short: why the item fails, or, for a tool call the provider could not
read, the step that asks the model for it again."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .messages import STOPPED_SHORT, AssistantMessage, StopReason
from .protocol import ToolCallStep
from .scratchpad import ERROR_PREFIX

__all__ = [
    "UNREADABLE_CALL_RETRIES",
    "ask_again",
    "cut_off",
    "max_iterations_reached",
    "reached_max_iterations",
    "stopped_short",
    "times_asked_again",
    "unreadable_call",
    "why_stopped",
]

_SAID: dict[StopReason, str] = {
    "max_tokens": "the answer was cut off at the model's output token limit",
    "content_filter": "the model stopped: content filter",
    "refusal": "the model stopped: it refused to answer",
    "malformed_tool_call": "the model stopped: it wrote a tool call the provider could not read",
    "other": "the model stopped without an answer",
}


def stopped_short(answer: AssistantMessage) -> bool:
    """Whether an answer without calls is no answer to give: it stopped short
    (`STOPPED_SHORT`), or for a reason of the provider's own with no text (Gemini's
    `TOO_MANY_TOOL_CALLS`): said as that, not as an empty answer."""
    if answer.tool_calls:
        return False
    reason = answer.stop_reason
    return reason in STOPPED_SHORT or (reason == "other" and not answer.content.strip())


def why_stopped(answer: AssistantMessage) -> str:
    """Why an answer that stopped short is not the item's answer (see `STOPPED_SHORT`)."""
    reason = answer.stop_reason or "other"
    said = _SAID.get(reason, f"the model stopped: {reason}")
    if answer.stop_detail:
        said += f" ({answer.stop_detail})"
    if reason == "max_tokens":
        said += "; raise the model's max_tokens, or ask for a shorter answer"
    return said


def cut_off(error: str | None) -> bool:
    """Whether an item's `error` says its answer was cut off at the model's output token limit
    (`why_stopped`): the item's `output` is then the text written until the cut, as an OpenAI
    client reads an answer that ends with `finish_reason: "length"`."""
    return error is not None and error.startswith(_SAID["max_tokens"])


UNREADABLE_CALL_RETRIES = 2
"""How many times in a row the model is asked again after writing a tool call its provider
could not read (Gemini's MALFORMED_FUNCTION_CALL) before the item fails and says why."""


def unreadable_call(answer: AssistantMessage) -> bool:
    return not answer.tool_calls and answer.stop_reason == "malformed_tool_call"


def times_asked_again(steps: Sequence[ToolCallStep]) -> int:
    """How many of the item's last model answers in a row were unreadable calls."""
    count = 0
    for step in reversed(steps):
        if not unreadable_call(step.message):
            break
        count += 1
    return count


def ask_again(answer: AssistantMessage, steps: Sequence[ToolCallStep]) -> ToolCallStep:
    """The step that answers an unreadable call: what went wrong, as the user's next turn."""
    detail = f" ({answer.stop_detail})" if answer.stop_detail else ""
    return ToolCallStep(
        tool_call_id=f"retry_{len(steps) + 1}",
        tool="",
        tool_input={},
        observation=(
            f"{ERROR_PREFIX}your last tool call could not be read{detail}. Call the tool again "
            "with arguments that are one valid JSON object, and only tools you were given."
        ),
        message=answer,
    )


def max_iterations_reached(n: int) -> str:
    """An item's error when it reached `max_iterations` (n8n's words)."""
    return (
        f"Max iterations ({n}) reached. "
        "The agent could not complete the task within the allowed number of iterations."
    )


def reached_max_iterations(error: str | None) -> bool:
    """Whether an item's `error` says it reached `max_iterations` (`max_iterations_reached`)."""
    return error is not None and _MAX_ITERATIONS.match(error) is not None


_MAX_ITERATIONS = re.compile(r"Max iterations \(\d+\) reached\. ")
