"""What a stored run that has not ended did so far: its last checkpoint, and the calls of the
step in progress recorded since.

A stored run writes a checkpoint when a step begins (its model's answer asks for calls), but a
call that ends writes only its record (a plain tool's end changes nothing else; the next
checkpoint, after the model's next answer, holds the results). So a run stopped after its
calls ended, while its model was asked again, or while another call of the step waited for a
person, has those calls in its records only. `runs show` and a stopped `run --json` read them
here, from the store's records or (the store away) from those this process made.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import JsonValue, ValidationError

from agent import ActionResponse, Usage

from ..journal import call_key
from ..run_state import RunState
from .status import RunStep

__all__ = ["recorded_calls", "recorded_so_far"]


def recorded_calls(steps: Iterable[RunStep]) -> dict[str, JsonValue]:
    """The results recorded of a run's calls that ended, by call name (`runs.steps`)."""
    return {step.name: step.output for step in steps if step.error is None}


def recorded_so_far(state: RunState, records: Mapping[str, JsonValue]) -> RunState:
    """`state` (a checkpoint) with each call of its step in progress that `records` (by call
    name) hold among its `answered` calls, and counted as it counts a call that ended: what
    it spent in `finished`, no longer in `children`. `state` itself if none is recorded."""
    request = state.request
    if request is None:  # between steps: the checkpoint holds every result
        return state
    answered = dict(state.answered)
    finished = dict(state.finished)
    children = dict(state.children)
    for action in request.actions:
        key = call_key(action.item_index, action.tool_call_id)
        output = records.get(f"tool {action.item_index} {action.tool_call_id}")
        if key in answered or not isinstance(output, dict):
            continue
        try:
            response = ActionResponse.model_validate(output)
        except ValidationError:  # a record of another version: left out, not a failure
            continue
        answered[key] = response
        if key not in finished and (response.usage != Usage() or key in children):
            finished[key] = response.usage
        children.pop(key, None)
    if len(answered) == len(state.answered):
        return state
    return state.model_copy(
        update={"answered": answered, "finished": finished, "children": children}
    )
