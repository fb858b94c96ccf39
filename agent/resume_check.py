"""Whether an engine's response can be resumed with the items a step was given.

A step trusts its metadata for everything it remembers, so a response that does not belong to
it (another run's, other items', results for calls nobody made) would have it answer the
wrong question, invent turns the model never wrote, or wait forever. `check_response` refuses
such a response with a `StateError` that names the problem.

An engine that never saw our metadata (it sends results with fresh metadata: no model was
called yet) is taken at its word: each result describes its own call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

from .errors import StateError
from .protocol import ActionResponse, AgentItem, AgentRequestMetadata, EngineResponse

__all__ = ["check_response", "items_digest", "resumed_state"]


def items_digest(items: Sequence[AgentItem]) -> str:
    """A short fingerprint of the items (their number, prompts and sessions), kept in the
    metadata so that a later step knows it was given the same items."""
    text = json.dumps([[item.prompt, item.session_id] for item in items], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def resumed_state(
    items: Sequence[AgentItem], response: EngineResponse | None, digest: str | None = None
) -> AgentRequestMetadata:
    """The loop state to go on from: `response`'s metadata once checked, or a fresh one.
    `digest`: the items' `items_digest`, if the caller made it already."""
    if response is None:
        return AgentRequestMetadata()
    check_response(items, response, digest)
    return response.metadata


def check_response(
    items: Sequence[AgentItem], response: EngineResponse, digest: str | None = None
) -> None:
    """Raise `StateError` when `response` cannot resume a step over `items` (whose
    `items_digest` is `digest`, if the caller made it already)."""
    state = response.metadata
    count = len(items)
    resume_hint = "resume a run with the items it started with"
    if state.items_digest is not None and state.items_digest != (digest or items_digest(items)):
        raise StateError(
            f"the response's metadata belongs to a run over other items than the {count} "
            f"given (other prompts or sessions, or another number of them): {resume_hint}"
        )
    for what, known in (
        ("steps", state.previous_steps),
        ("pending calls", state.pending),
        ("a result", state.finished_items),
        ("iterations", state.iterations),
        ("invalid answers", state.invalid_answers),
    ):
        beyond = sorted(index for index in known if not 0 <= index < count)
        if beyond:
            raise StateError(
                f"the response's metadata holds {what} for item {beyond[0]}, but the step was "
                f"given {_items(count)}: {resume_hint}"
            )
    ours = state.iteration_count > 0  # results for calls a model of ours made
    delivered: dict[tuple[int, str], ActionResponse] = {}
    for result in response.action_responses:
        action = result.action
        index, call_id = action.item_index, action.tool_call_id
        if not 0 <= index < count:
            raise StateError(
                f"the response has a result for item {index} (call {call_id!r}), but the step "
                f"was given {_items(count)}"
            )
        earlier = delivered.get((index, call_id))
        if earlier is not None and earlier != result:
            raise StateError(
                f"the response has two different results for call {call_id!r} of item {index}"
            )
        delivered[(index, call_id)] = result
        if not ours or any(s.tool_call_id == call_id for s in state.previous_steps.get(index, ())):
            continue  # an engine of its own, or a result delivered again: already a step
        pending = state.pending.get(index)
        calls = pending.tool_calls if pending is not None else ()
        call = next((c for c in calls if c.id == call_id), None)
        if call is None:
            waiting = (
                f"it waits for {', '.join(repr(c.id) for c in calls)}"
                if calls
                else "it waits for no tool result"
            )
            raise StateError(
                f"the response has a result for call {call_id!r} of item {index}, which made no "
                f"such call ({waiting})"
            )
        if call.name != action.tool:
            raise StateError(
                f"the response's result for call {call_id!r} of item {index} is from tool "
                f"{action.tool!r}, but the call was to {call.name!r}"
            )


def _items(count: int) -> str:
    return "1 item" if count == 1 else f"{count} items"
