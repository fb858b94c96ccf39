"""How a command prints what a run returned: the answer as text, or one JSON object."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from pydantic import JsonValue

from agent import AgentRequestMetadata, EngineResponse, ItemResult, ToolCallStep
from agent.scratchpad import build_steps
from toolkits.printable import printable

from ..errors import stopped_in
from ..item_results import empty_failed, steps_json
from ..run_state import RunResult, RunState, spent
from .exits import FAILED, OK
from .output import result_json, result_stdout

__all__ = [
    "ended_status",
    "print_result",
    "run_error_json",
    "run_json",
    "so_far",
    "stopped_chain",
]


def print_result(
    result: RunResult,
    *,
    label: bool = False,
    as_json: bool = False,
    stored: bool = True,
    shown: Callable[[str | None], bool] | None = None,
) -> int:
    """Print each answer on stdout (unless `shown` says it was streamed already) or its error
    on stderr, or the whole run as JSON (`run_id` null unless `stored`); the exit code of
    the run."""
    # The step loop made an empty answer the item's failure; a result it did not make (an
    # older stored run's) may still have one.
    items = [empty_failed(item) for item in result.items]
    failed = any(item.error is not None for item in items)
    if as_json:
        shown_json = run_json(result, items[0], stored=stored)
        print(result_json(shown_json), file=result_stdout(), flush=True)
        return FAILED if failed else OK
    for item in items:
        if item.error is not None:
            print(printable(f"error: {item.error}"), file=sys.stderr)
        elif shown is None or not shown(item.output):
            # Piped, the answer is exactly the model's; on a terminal, its escapes are text.
            answer = printable(item.output or "") if result_stdout().isatty() else item.output
            # Flushed: a caller may still have servers to stop, which a reader need not wait for.
            print(f"answer: {answer}" if label else answer, file=result_stdout(), flush=True)
    return FAILED if failed else OK


def run_json(
    result: RunResult, item: ItemResult | None = None, *, stored: bool = True
) -> dict[str, Any]:
    """`{run_id, agent, status, output, error, stopped_in, usage, iterations, steps, handoff}`
    of a one-question run (`run_id` null unless `stored`; `stopped_in` null: a run that
    returned did not stop; `handoff`: the agent whose answer `output` is, null: the run's own
    agent's); with an output schema, `output` is the answer itself (JSON), not its text."""
    item = item or result.items[0]
    return {
        "run_id": result.run_id if stored else None,
        "agent": result.agent,
        "status": ended_status(result),
        "output": item.structured if item.structured is not None else item.output,
        "error": item.error,
        "stopped_in": None,
        "usage": result.usage.model_dump(),
        "iterations": result.iterations,
        "steps": steps_json(item.steps or []),
        "handoff": item.handoff,
    }


def ended_status(result: RunResult) -> str:
    """The status a run that returned `result` has, as the run store words it: `failed` when
    every question failed on its own, else `succeeded` (its failed items in its result)."""
    items = [empty_failed(item) for item in result.items]
    failed = bool(items) and all(item.error is not None for item in items)
    return "failed" if failed else "succeeded"


def run_error_json(
    run_id: str | None,
    agent: str,
    exc: BaseException,
    state: RunState | None = None,
    *,
    status: str = "failed",
    **more: JsonValue,
) -> str:
    """The one JSON object `--json` prints for a run that failed before it returned: the keys
    of `run_json`, with the usage, iterations and steps of `state` (its last checkpoint) when
    at hand, else null and empty (`run_id` null: no run was stored, the store failed).
    `status`: the stored run's (`stopped`: it resumes; `cancelled`; `waiting_approval` with
    `--no-wait`), or `failed` for a run that was not stored, which has ended; `stopped_in`:
    the agents down to the sub-agent whose run `exc` stopped (null: none); `more`: keys
    besides (`waiting`). Bad input (exit 2) prints none: nothing ran."""
    usage, iterations, steps = so_far(state)
    shown = {
        "run_id": run_id,
        "agent": agent,
        "status": status,
        "output": None,
        "error": str(exc),
        "stopped_in": stopped_chain(exc, state, status),
        "usage": usage,
        "iterations": iterations,
        "steps": steps_json(steps),
        "handoff": None,
        **more,
    }
    return result_json(shown)


def stopped_chain(
    exc: BaseException, state: RunState | None, status: str
) -> list[JsonValue] | None:
    """`stopped_in` of a run that ended before it returned: the agents down to the sub-agent
    whose run `exc` stopped, or for a run interrupted (Ctrl-C, a signal: `exc` says nothing
    of where), down to the sub-agent its last checkpoint (`state`) was inside (several side
    by side: as far down as they go together). None: its own agent's run."""
    chain = stopped_in(exc)
    if chain is None and status == "stopped" and state is not None:
        chain = _inside(state)
    return list[JsonValue](chain) if chain is not None and len(chain) > 1 else None


def _inside(state: RunState) -> list[str]:
    """`state`'s agent and the agents of its runs in flight below it that all of them share."""
    below = [_inside(child) for child in state.children.values()]
    shared: list[str] = []
    for agents in zip(*below, strict=False):
        if len(set(agents)) > 1:
            break
        shared.append(agents[0])
    return [state.agent, *shared]


def so_far(
    state: RunState | None,
) -> tuple[dict[str, Any] | None, int | None, list[ToolCallStep]]:
    """The usage, iterations and (first item's) steps of a run's last checkpoint, with the
    calls of its step in progress that ended (`answered`); None, None and none when it is not
    at hand."""
    if state is None:
        return None, None, []
    exchange = state.response or state.request
    metadata = exchange.metadata if exchange is not None else AgentRequestMetadata()
    usage = spent(state).model_dump()  # its sub-agents' calls too
    steps = build_steps(state.response, 0) or metadata.previous_steps.get(0, [])
    if state.request is not None and state.answered:
        ended = [r for r in state.answered.values() if r.action.item_index == 0]
        ids = {r.action.tool_call_id for r in ended} | {step.tool_call_id for step in steps}
        step = EngineResponse(action_responses=ended, metadata=state.request.metadata)
        # As the step will have them, in the model's order; those under way not yet.
        steps = [s for s in build_steps(step, 0) if s.tool_call_id in ids]
    return usage, metadata.iteration_count, steps
