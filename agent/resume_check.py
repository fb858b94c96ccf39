"""Whether an engine's response can be resumed with the items a step was given.

A step trusts its metadata for everything it remembers, so a response that does not belong to
it (another run's, other items', results for calls nobody made) would have it answer the
wrong question, invent turns the model never wrote, or wait forever. `check_response` refuses
such a response with a `StateError` that names the problem; `check_request` refuses a stored
request the same way before the engine runs any of its calls (an action of an item the run
does not have would wait for a person's approval that no item needs, or run a call no model
made).

An engine that never saw our metadata (it sends results with fresh metadata: no model was
called yet) is taken at its word: each result describes its own call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from .errors import StateError
from .protocol import (
    Action,
    ActionResponse,
    AgentItem,
    AgentRequestMetadata,
    EngineRequest,
    EngineResponse,
)

__all__ = ["check_request", "check_response", "items_digest", "resumed_state"]


def items_digest(items: Sequence[AgentItem]) -> str:
    """A short fingerprint of the items (their number, prompts, sessions and histories given),
    kept in the metadata so that a later step knows it was given the same items. An item
    without a history has the fingerprint it had before items could bring one."""
    text = json.dumps([_fingerprint(item) for item in items], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _fingerprint(item: AgentItem) -> list[Any]:
    if item.history is None:
        return [item.prompt, item.session_id]
    return [item.prompt, item.session_id, [m.model_dump(mode="json") for m in item.history]]


def resumed_state(
    items: Sequence[AgentItem], response: EngineResponse | None, digest: str | None = None
) -> AgentRequestMetadata:
    """The loop state to go on from: `response`'s metadata once checked, or a fresh one.
    `digest`: the items' `items_digest`, if the caller made it already."""
    if response is None:
        return AgentRequestMetadata()
    check_response(items, response, digest)
    return response.metadata


def check_request(items: Sequence[AgentItem], request: EngineRequest) -> None:
    """Raise `StateError` when a stored `request` cannot be resumed over `items`: its metadata
    does not fit them (as `check_response` says), or an action is of an item the run does not
    have, or of a call its item's model answer did not make."""
    state = request.metadata
    _check_metadata(items, state, None, "request")
    for action in request.actions:
        index = action.item_index
        if not 0 <= index < len(items):
            raise StateError(
                f"the request has an action for item {index} (call {action.tool_call_id!r}), "
                f"but the run has {_items(len(items))}: {_RESUME_HINT}"
            )
        if state.iteration_count > 0:  # actions for calls a model of ours made
            _check_made(state, action, "action")


def check_response(
    items: Sequence[AgentItem], response: EngineResponse, digest: str | None = None
) -> None:
    """Raise `StateError` when `response` cannot resume a step over `items` (whose
    `items_digest` is `digest`, if the caller made it already)."""
    state = response.metadata
    count = len(items)
    _check_metadata(items, state, digest, "response")
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
        _check_made(state, action, "result")


_RESUME_HINT = "resume a run with the items it started with"


def _check_metadata(
    items: Sequence[AgentItem], state: AgentRequestMetadata, digest: str | None, source: str
) -> None:
    """Raise `StateError` when the metadata of `source` (the response, the request) cannot
    be of a run over `items`."""
    count = len(items)
    if not count:
        raise StateError(f"the step was given no items; {_RESUME_HINT}")
    if state.items_digest is not None and state.items_digest != (digest or items_digest(items)):
        raise StateError(
            f"the {source}'s metadata belongs to a run over other items than the {count} "
            f"given (other prompts or sessions, or another number of them): {_RESUME_HINT}"
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
                f"the {source}'s metadata holds {what} for item {beyond[0]}, but the step was "
                f"given {_items(count)}: {_RESUME_HINT}"
            )
    both = sorted(set(state.finished_items) & set(state.pending))
    if both:
        raise StateError(
            f"the {source}'s metadata holds item {both[0]} as finished and as waiting for the "
            "results of its calls: it cannot be both"
        )
    if len(state.finished_items) == count:
        raise StateError(
            f"the {source}'s metadata holds every item as finished ({_items(count)}): a run "
            "that has ended has nothing to resume"
        )


def _check_made(state: AgentRequestMetadata, action: Action, kind: str) -> None:
    """Raise `StateError` unless the model's answer of `action`'s item made its call, to its
    tool; `kind`: what `action` is of, a response's `result` or a request's `action`."""
    index, call_id = action.item_index, action.tool_call_id
    source = "response" if kind == "result" else "request"
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
            f"the {source} has {'a' if kind == 'result' else 'an'} {kind} for call {call_id!r} "
            f"of item {index}, which made no such call ({waiting})"
        )
    if call.name != action.tool:
        raise StateError(
            f"the {source}'s {kind} for call {call_id!r} of item {index} is from tool "
            f"{action.tool!r}, but the call was to {call.name!r}"
        )


def _items(count: int) -> str:
    return "1 item" if count == 1 else f"{count} items"
