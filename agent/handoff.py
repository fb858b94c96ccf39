"""Handoffs: a tool call whose result, when it succeeds, is the item's answer.

The engine marks such tools (`ToolDefinition.hands_off`: for the gateway, another agent that
takes the conversation over); the agent knows nothing of what runs behind them. When the
model calls one:

- The other calls of the same answer run too (their results are in the item's steps), and the
  first handoff call of the answer whose arguments can be passed on is the one made: each
  later one is answered here, not made, so an answer hands the item to one agent only. A
  handoff takes one optional argument, `context` (text): others are refused here
  (`handoff_refusal`), never dropped, as the model would believe it had passed them on.
- Its result ends the item with no further model call: its text is the output, validated
  against the output schema when there is one. A handoff that failed (or was denied) is told
  to the model as any failed call is, and so is an answer that does not fit the schema: the
  model goes on, and may answer itself or hand off again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from .messages import AssistantMessage, ToolDefinition
from .output import OutputInvalid, OutputSchema
from .protocol import Action, EngineResponse, ToolCallStep
from .scratchpad import ERROR_PREFIX, observation_of

__all__ = ["Handoff", "handed_off", "handoff_refusal", "kept_of_turn", "one_handoff"]


@dataclass(frozen=True, slots=True)
class Handoff:
    """An item answered by the tool it was handed to."""

    tool: str
    call_id: str
    output: str
    structured: JsonValue | None
    """The answer as the output schema read it (None without a schema)."""


def one_handoff(
    answer: AssistantMessage, actions: Sequence[Action], tools: Mapping[str, ToolDefinition]
) -> tuple[list[Action], list[ToolCallStep]]:
    """The actions to run, and the steps that answer the answer's other handoff calls: those
    whose arguments are refused, and those after the first made, saying so."""
    kept: list[Action] = []
    refused: list[ToolCallStep] = []
    handing: str | None = None
    calls = {call.id: call for call in answer.tool_calls}
    for action in actions:
        tool = tools.get(action.tool)
        if tool is None or not tool.hands_off:
            kept.append(action)
            continue
        call = calls.get(action.tool_call_id)
        arguments: dict[str, JsonValue] = dict(call.arguments) if call is not None else {}
        said = handoff_refusal(arguments)
        if said is None and handing is None:
            handing = action.tool
            kept.append(action)
            continue
        if said is None:
            said = (
                f"not made: this answer hands the conversation to {handing!r} (its first "
                "handoff); one answer hands it to one agent only"
            )
        refused.append(
            ToolCallStep(
                tool_call_id=action.tool_call_id,
                tool=action.tool,
                tool_input=arguments,
                observation=f"{ERROR_PREFIX}{said}",
                message=answer,
                is_error=True,
            )
        )
    return kept, refused


def handoff_refusal(arguments: Mapping[str, JsonValue]) -> str | None:
    """Why a handoff's `arguments` cannot be passed on (what the model is told), or None."""
    others = sorted(key for key in arguments if key != "context")
    if others:
        named = ", ".join(f"`{key}`" for key in others)
        return (
            f"a handoff takes one optional argument, `context` (text), not {named}: the "
            "user's message is passed on as it is; call again with `context` alone, or none"
        )
    context = arguments.get("context")
    if context is not None and not isinstance(context, str):
        return (
            f"`context` must be text (what the agent needs beyond the user's message), not "
            f"{_json_kind(context)}: call again with it as a string, or without it"
        )
    return None


def _json_kind(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "an object" if isinstance(value, dict) else "a list"


def handed_off(
    response: EngineResponse | None,
    index: int,
    steps: list[ToolCallStep],
    tools: Mapping[str, ToolDefinition],
    output: OutputSchema | None,
) -> Handoff | None:
    """The handoff that answers item `index`: one of the results just arrived is a handoff's
    that succeeded (its result has no error), or (a step made again after its turn failed to
    save: the result came in an earlier response) the metadata names the handoff's call
    (`handed_off`). Read from those records, never from a step's text: a step the agent
    answered itself (a repeated call's notice, a refusal) was never the specialist's answer.
    One whose answer does not fit `output` answers nothing: its step in `steps` then tells
    the model why (changed in place, so it is kept with the steps, as an error)."""
    if response is None:
        return None
    for result in response.action_responses:
        action = result.action
        tool = tools.get(action.tool)
        if action.item_index != index or tool is None or not tool.hands_off:
            continue
        if result.error is not None:
            return None  # the model reads the failure in its step
        return _answer(action.tool, action.tool_call_id, observation_of(result.data), steps, output)
    call_id = response.metadata.handed_off.get(index)
    step = next((step for step in steps if step.tool_call_id == call_id), None)
    if step is not None:
        return _answer(step.tool, step.tool_call_id, step.observation, steps, output)
    return None


def _answer(
    tool: str, call_id: str, text: str, steps: list[ToolCallStep], output: OutputSchema | None
) -> Handoff | None:
    if output is None:
        return Handoff(tool, call_id, text, None)
    try:
        structured = output.from_text(text)
    except OutputInvalid as invalid:
        for position, step in enumerate(steps):
            if step.tool_call_id == call_id:
                told = (
                    f"{ERROR_PREFIX}the answer of {tool!r} does not fit the output schema "
                    f"({invalid}), so it is not the answer: answer yourself. It said: {text}"
                )
                steps[position] = step.model_copy(update={"observation": told})
        return None
    return Handoff(tool, call_id, text, structured)


def kept_of_turn(steps: Sequence[ToolCallStep], handoff: Handoff) -> list[ToolCallStep]:
    """The steps a session keeps of a handed-off turn: every call with its result, as for any
    turn, but the handoff's own: its result is the turn's answer, kept once, as the turn's
    last message. The answer that handed off keeps its other calls (a message left with
    none, its words before handing off included, is not kept)."""
    handing = next((step.message for step in steps if step.tool_call_id == handoff.call_id), None)
    if handing is None:
        return list(steps)
    others = tuple(call for call in handing.tool_calls if call.id != handoff.call_id)
    kept = handing.model_copy(update={"tool_calls": others}) if others else None
    of_handing = {call.id for call in handing.tool_calls}
    turn: list[ToolCallStep] = []
    for step in steps:
        if step.tool_call_id not in of_handing:
            turn.append(step)
        elif kept is not None and step.tool_call_id != handoff.call_id:
            turn.append(step.model_copy(update={"message": kept}))
    return turn
