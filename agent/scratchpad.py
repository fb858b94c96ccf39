"""The scratchpad: a run's finished tool calls, rebuilt from an engine response.

Rules (as n8n's Tools Agent V3): steps are previous steps plus newly arrived results, de-duplicated
by tool-call id. An observation is `Error: <message>` for a failure, the value of a lone
`response` field, the text itself for a string, and compact JSON for anything else; then the
response's `note`, if any, after a blank line.

`prompt_messages` puts a model call's messages together. Also read from the steps: whether a call repeats one too often (`repeat_notice`), and call ids
no other call of the conversation has (`with_unique_call_ids`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from .messages import (
    AssistantMessage,
    ChatMessage,
    MediaPart,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from .protocol import ActionResponse, EngineResponse, ToolCallStep

__all__ = [
    "ERROR_PREFIX",
    "MEDIA_BYTES_PER_CALL",
    "NO_RESULT",
    "REPEAT_NOTICE",
    "build_steps",
    "observation",
    "prompt_messages",
    "renamed_calls_notice",
    "repeat_notice",
    "scratchpad_messages",
    "tool_usage",
    "with_unique_call_ids",
]

ERROR_PREFIX = "Error: "
"""How the observation of a failed call begins."""

NO_RESULT = f"{ERROR_PREFIX}this call produced no result"
"""The observation of a call the engine answered with no result."""

MEDIA_BYTES_PER_CALL = 10_000_000
"""Media bytes (decoded) one model call carries at most: the newest results' first. Base64
makes them a third larger: ~13 MB, within Gemini's 20 MB request and Anthropic's 32 MB. Older
media are left out of the call (their description stays in the observation's text)."""


def observation(response: ActionResponse) -> str:
    if response.error is not None:
        told = f"{ERROR_PREFIX}{response.error}"
    else:
        told = observation_of(response.data)
    return f"{told}\n\n{response.note}" if response.note else told


def observation_of(data: JsonValue) -> str:
    if isinstance(data, dict) and data.keys() == {"response"}:
        data = data["response"]
    if isinstance(data, str):
        return data
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def build_steps(response: EngineResponse | None, item_index: int) -> list[ToolCallStep]:
    """The item's steps so far: earlier ones from metadata, then the results just arrived."""
    if response is None:
        return []
    steps = list(response.metadata.previous_steps.get(item_index, ()))
    seen = {step.tool_call_id for step in steps}
    pending = response.metadata.pending.get(item_index)
    for result in response.action_responses:
        action = result.action
        if action.item_index != item_index or action.tool_call_id in seen:
            continue
        seen.add(action.tool_call_id)
        call = _find_call(pending, action.tool_call_id)
        if pending is None or call is None:
            # An engine that never saw our metadata answered; keep the call it describes.
            call = ToolCall(id=action.tool_call_id, name=action.tool, arguments=action.input)
            message = AssistantMessage(tool_calls=(call,))
        else:
            message = pending
        steps.append(
            ToolCallStep(
                tool_call_id=action.tool_call_id,
                tool=action.tool,
                tool_input=call.arguments,
                observation=observation(result),
                message=message,
                media=result.media,
                is_error=result.error is not None,
            )
        )
    if pending is not None:
        # A call the engine returned no result for (it lost it) is not left out: the model
        # would see neither the call nor that it failed. It is told the call produced none.
        steps += [
            ToolCallStep(
                tool_call_id=call.id,
                tool=call.name,
                tool_input=call.arguments,
                observation=NO_RESULT,
                message=pending,
                is_error=True,
            )
            for call in pending.tool_calls
            if call.id not in seen
        ]
    return _in_call_order(steps)


def _in_call_order(steps: list[ToolCallStep]) -> list[ToolCallStep]:
    """The steps of each model answer in the order the model made its calls: the calls the
    agent answered itself were recorded before the engine's results of the same answer."""
    ordered: list[ToolCallStep] = []
    for group in _by_answer(steps):
        if len(group) > 1:
            position = {call.id: i for i, call in enumerate(group[0].message.tool_calls)}
            group.sort(key=lambda step: position.get(step.tool_call_id, len(position)))
        ordered += group
    return ordered


def _by_answer(steps: Sequence[ToolCallStep]) -> list[list[ToolCallStep]]:
    """The steps split by the model answer they came from, in order. Two answers in a row may
    be equal (an unreadable call asked for again, the same text sent back twice): an answer
    without calls has one step, its correction, and one with calls one step per call."""
    groups: list[list[ToolCallStep]] = []
    ids: set[str] = set()
    for step in steps:
        group = groups[-1] if groups else None
        if (
            group is None
            or not step.message.tool_calls
            or step.tool_call_id in ids
            or step.message != group[0].message
        ):
            groups.append([step])
            ids = {step.tool_call_id}
        else:
            group.append(step)
            ids.add(step.tool_call_id)
    return groups


def tool_usage(response: EngineResponse | None) -> Usage:
    """Model usage reported by tools that just ran (agents run as tools), counted once."""
    total = Usage()
    if response is None:
        return total
    counted: set[tuple[int, str]] = set()  # a call id names one call of one item only
    for result in response.action_responses:
        action = result.action
        call = (action.item_index, action.tool_call_id)
        earlier = response.metadata.previous_steps.get(action.item_index, ())
        if call in counted or any(s.tool_call_id == action.tool_call_id for s in earlier):
            continue
        counted.add(call)
        total += result.usage
    return total


def prompt_messages(
    system_message: str,
    history: Sequence[ChatMessage],
    prompt: str,
    steps: Sequence[ToolCallStep],
) -> list[ChatMessage]:
    """A model call's messages: system, history, question, scratchpad. A summary at the head
    of the history joins the system message: some chat templates refuse a second one."""
    system = [system_message]
    rest = list(history)
    while rest and isinstance(rest[0], SystemMessage):
        system.append(rest.pop(0).content)
    return [
        SystemMessage(content="\n\n".join(system)),
        *rest,
        UserMessage(content=prompt),
        *scratchpad_messages(steps),
    ]


def scratchpad_messages(steps: Sequence[ToolCallStep], *, media: bool = True) -> list[ChatMessage]:
    """Each model answer once, in order and verbatim, followed by a result for every call it
    made (or, for a text answer sent back, by what was wrong with it). With `media`, results
    carry their steps' media, the newest first, up to `MEDIA_BYTES_PER_CALL`, and failed calls
    are marked (`ToolMessage.is_error`); without, text only (what chat memory keeps, as an
    older gateway reads it too)."""
    shown = _media_within_budget(steps) if media else {}
    messages: list[ChatMessage] = []
    for group in _by_answer(steps):
        message = group[0].message
        messages.append(message)
        if not message.tool_calls:  # an answer sent back: what was wrong comes as the user's turn
            messages.append(UserMessage(content=group[0].observation))
            continue
        by_id = {step.tool_call_id: step for step in group}
        for call in message.tool_calls:
            step = by_id.get(call.id)
            content = step.observation if step else NO_RESULT
            messages.append(
                ToolMessage(
                    tool_call_id=call.id,
                    name=call.name,
                    content=content,
                    media=shown.get(call.id, ()),
                    is_error=media and (step.is_error if step else True),
                )
            )
    return messages


def _media_within_budget(steps: Sequence[ToolCallStep]) -> dict[str, tuple[MediaPart, ...]]:
    """Per call id, the media a model call carries: the newest steps' first, each part that
    still fits `MEDIA_BYTES_PER_CALL`."""
    left = MEDIA_BYTES_PER_CALL
    shown: dict[str, tuple[MediaPart, ...]] = {}
    for step in reversed(steps):
        kept: list[MediaPart] = []
        for part in step.media:
            if part.size <= left:
                kept.append(part)
                left -= part.size
        if kept:
            shown[step.tool_call_id] = tuple(kept)
    return shown


def _find_call(message: AssistantMessage | None, call_id: str) -> ToolCall | None:
    if message is None:
        return None
    return next((c for c in message.tool_calls if c.id == call_id), None)


REPEATS_RUN = 1
"""How many times an identical call (same tool, same arguments) is run again before the agent
answers it with the result the model already has."""
REPEAT_NOTICE = "Not run again:"
"""How the notice for a call repeated too often begins (after `ERROR_PREFIX` when the result
it repeats was a failure)."""


def repeat_notice(
    call: ToolCall, steps: Sequence[ToolCallStep], earlier: Sequence[ToolCall] = ()
) -> str | None:
    """The observation for a call repeated too often, or None when it may run. `earlier`: the
    calls before it in its answer, of which an identical one runs once (at the same moment no
    clock or search answers otherwise, and a side effect would happen twice)."""
    key = _arguments_key(call.arguments)
    same = [s for s in steps if s.tool == call.name and _arguments_key(s.tool_input) == key]
    if len(same) <= REPEATS_RUN:
        first = next((c for c in earlier if _same_call(c, call)), None)
        if first is None:
            return None
        return (
            f"{REPEAT_NOTICE} this answer already calls {call.name!r} with these exact "
            f"arguments ({first.id}); that call's result is this one's too."
        )
    ran = [
        s for s in same if not s.observation.removeprefix(ERROR_PREFIX).startswith(REPEAT_NOTICE)
    ]
    result = ran[-1].observation if ran else same[-1].observation
    notice = (
        f"{REPEAT_NOTICE} you already called {call.name!r} with these exact arguments "
        f"{len(same)} times. Its result was: {result}\n"
        "Use that result, or call with different arguments."
    )
    # A failure repeated is still a failure: the model and the trace read it as one.
    return f"{ERROR_PREFIX}{notice}" if result.startswith(ERROR_PREFIX) else notice


def _same_call(one: ToolCall, other: ToolCall) -> bool:
    """Identical calls (arguments not JSON are told so, never the same as `{}`)."""
    readable = one.invalid_arguments is None and other.invalid_arguments is None
    return (
        readable
        and one.name == other.name
        and _arguments_key(one.arguments) == _arguments_key(other.arguments)
    )


def _arguments_key(arguments: Mapping[str, Any]) -> str:
    """Arguments as JSON with sorted keys: identical as the tool would get them. Python's `==`
    took `true` for `1` and `1.0` for `1`, so a call the tool never got was told another's
    result."""
    return json.dumps(arguments, sort_keys=True, default=str)


def with_unique_call_ids(
    answer: AssistantMessage, messages: Sequence[ChatMessage], steps: Sequence[ToolCallStep]
) -> tuple[AssistantMessage, list[tuple[str, str]]]:
    """`answer` with every call under an id no other call of the conversation (`messages`,
    the session's history and this run's, and `steps`) has: results are matched to calls by
    id. Also the calls renamed, as (old id, new id).

    A call keeps its id unless an earlier call has it (the conversation's, or one before it
    in `answer`) or it has none. A new id is one neither the conversation nor `answer` uses:
    it never takes the id the model gave another call."""
    used = {step.tool_call_id for step in steps}
    for message in messages:
        if isinstance(message, AssistantMessage):
            used.update(call.id for call in message.tool_calls)
    reserved = used | {call.id for call in answer.tool_calls}
    fresh = (f"call_{n}" for n in itertools.count(len(used) + 1) if f"call_{n}" not in reserved)
    calls: list[ToolCall] = []
    renamed: list[tuple[str, str]] = []
    for call in answer.tool_calls:
        if not call.id or call.id in used:
            new_id = next(fresh)
            renamed.append((call.id, new_id))
            call = call.model_copy(update={"id": new_id})
        used.add(call.id)
        calls.append(call)
    if not renamed:
        return answer, renamed
    return answer.model_copy(update={"tool_calls": tuple(calls)}), renamed


def renamed_calls_notice(renamed: Sequence[tuple[str, str]]) -> str:
    """What the trace is told of calls `with_unique_call_ids` renamed: the model's answer (its
    span) names them by the model's ids, the tool calls and the steps by the new ones."""
    pairs = ", ".join(f"{old or '(none)'} -> {new}" for old, new in renamed)
    return f"call ids renamed (the model gave a call one another call has, or none): {pairs}"
