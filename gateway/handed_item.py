"""What the agent a conversation is handed to is asked (README, "Handoffs").

The user's message as it came, with the handing agent's `context` (`handoff_prompt`), after
the conversation before it: the handing item's own history (a caller that keeps it, as an
OpenAI-style client does), else its session's as the handing agent's memory gives it to its
model (its window of turns, its summary). Then the handing agent's calls of this turn, each
with its result (`turn_so_far`): what it found before handing over reaches the specialist
whether or not its model copied it into `context`.

Those calls go as text inside the handed-over message, as `context` does, not as tool-call
messages: they are another agent's calls, of tools the specialist may not have, made by
another model. As messages after the user's, they would be the current turn, where Gemini 3
refuses (400) every function call without the thought signature Gemini gave it, and Anthropic
refuses tool blocks in a request that offers no tools; the specialist's model would also take
them for its own and call those tools again. As text, every provider reads them alike, as
the handing agent's (the OpenAI Agents SDK's opt-in `nest_handoff_history` also hands a
transcript over as one message). Media are described, as the results' text describes them, not
sent. The item holds them in its prompt, so it needs no field an older gateway lacks.

The calls are those of the answers before the handing one: the other calls of the handing
answer run beside the handoff, their results not there yet. At most `TURN_MAX_CHARS` of them,
the newest kept whole where they fit, so a turn of huge results cannot fill the specialist's
window. The item is made once: a run stopped inside the specialist resumes with the one stored.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from pydantic import JsonValue

from agent import Action, AgentItem, ChatMemory, ChatMessage, ToolCallStep

from .run_state import RunState

__all__ = ["TURN_MAX_CHARS", "handed_item", "turn_so_far"]

TURN_MAX_CHARS = 30_000
"""Characters of the handing agent's calls (one line each) the specialist reads at most
(~7,500 tokens at four a token): the newest are kept; a newest one longer alone is cut."""


async def handed_item(
    prompt: str,
    state: RunState,
    action: Action,
    memory: ChatMemory | None,
    handoffs: Collection[str] = (),
) -> AgentItem:
    """The one item of the agent that `action` (of the run `state`) hands its item to: asked
    `prompt` after that item's conversation so far, with its context, and followed by the
    handing agent's calls of this turn (not its `handoffs`' calls: its routing, not its work).
    Raises `MemoryStoreError` when the session cannot
    be read (the run stops, as when the handing agent's own history cannot be)."""
    item = state.items[action.item_index]
    history: list[ChatMessage] = []
    if item.history is not None:
        history = list(item.history)
    elif memory is not None and item.session_id is not None:
        history = list((await memory.load(item.session_id)).messages)
    calls = turn_so_far(state, action, handoffs)
    asked = f"{prompt}\n\n{calls}" if calls else prompt
    return AgentItem(prompt=asked, context=item.context, history=history or None)


def turn_so_far(state: RunState, action: Action, handoffs: Collection[str] = ()) -> str:
    """The calls the agent of `state` made this turn before the answer holding `action`,
    but those of its `handoffs` (an earlier one refused or failed), as text the specialist
    reads ("" for none)."""
    if state.request is None:
        return ""
    metadata = state.request.metadata
    handing = metadata.pending.get(action.item_index)
    beside = {call.id for call in handing.tool_calls} if handing else {action.tool_call_id}
    # Steps of calls (an answer sent back has none), but the handing answer's.
    steps = [
        step
        for step in metadata.previous_steps.get(action.item_index, ())
        if step.message.tool_calls and step.tool_call_id not in beside and step.tool not in handoffs
    ]
    lines, left_out = _newest_within(steps, TURN_MAX_CHARS)
    if not lines:
        return ""
    said = [
        f"Tool calls the agent {state.agent!r} made for this message before handing it over, "
        "oldest first, one JSON object a line (tool, arguments, result):"
    ]
    if left_out:
        older = "1 older call" if left_out == 1 else f"{left_out} older calls"
        said.append(f"({older} left out: the list holds at most {TURN_MAX_CHARS} characters)")
    return "\n".join([*said, *lines])


def _newest_within(steps: Sequence[ToolCallStep], limit: int) -> tuple[list[str], int]:
    """One line per step, the newest that fit in `limit` characters (the newest alone cut to
    fit), oldest first; and how many older steps were left out."""
    kept: list[str] = []
    size = 0
    for step in reversed(steps):
        line = _line(step, _result(step.observation))
        if size + len(line) + 1 > limit:
            if not kept:
                kept.append(_cut_to(step, limit))
            break
        kept.append(line)
        size += len(line) + 1
    return kept[::-1], len(steps) - len(kept)


def _line(step: ToolCallStep, result: JsonValue) -> str:
    said = {"tool": step.tool, "arguments": step.tool_input, "result": result}
    return json.dumps(said, separators=(",", ":"), ensure_ascii=False)


def _result(observation: str) -> JsonValue:
    """A result that is a JSON object or array as itself (not a string of escaped JSON),
    any other as its text."""
    if observation[:1] not in ("{", "["):
        return observation
    try:
        return json.loads(observation, parse_constant=_no_constant)
    except (ValueError, RecursionError):  # a text nested past what Python reads is text
        return observation


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _cut_to(step: ToolCallStep, limit: int) -> str:
    """The step's line within `limit` characters, its result's text cut, saying how much."""
    text = step.observation
    keep = max(0, limit - len(_line(step, "")) - 40)
    while True:
        cut = f"{text[:keep]} [... {len(text) - keep} more characters cut]"
        line = _line(step, cut)
        if len(line) <= limit or keep == 0:
            return line
        keep = max(0, keep - (len(line) - limit))
