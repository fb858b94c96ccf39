"""How a command prints what a run returned: the answer as text, or one JSON object."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import JsonValue

from agent import AgentRequestMetadata, ItemResult, ToolCallStep
from agent.scratchpad import build_steps
from toolkits.printable import printable

from ..run_state import RunResult, RunState, spent
from ..step_loop import EMPTY_ANSWER
from .exits import FAILED, OK

__all__ = ["empty_is_an_error", "print_result", "run_error_json", "run_json", "so_far"]


def print_result(
    result: RunResult,
    *,
    label: bool = False,
    as_json: bool = False,
    shown: Callable[[str | None], bool] | None = None,
) -> int:
    """Print each answer on stdout (unless `shown` says it was streamed already) or its error
    on stderr, or the whole run as JSON; the exit code of the run."""
    items = [empty_is_an_error(item) for item in result.items]
    failed = any(item.error is not None for item in items)
    if as_json:
        print(json.dumps(run_json(result, items[0]), ensure_ascii=False))
        return FAILED if failed else OK
    for item in items:
        if item.error is not None:
            print(printable(f"error: {item.error}"), file=sys.stderr)
        elif shown is None or not shown(item.output):
            # Piped, the answer is exactly the model's; on a terminal, its escapes are text.
            answer = printable(item.output or "") if sys.stdout.isatty() else item.output
            print(f"answer: {answer}" if label else answer)
    return FAILED if failed else OK


def empty_is_an_error(item: ItemResult) -> ItemResult:
    # Nothing answered is not a success: say so instead of printing a blank answer.
    if item.error is None and not (item.output or "").strip():
        return item.model_copy(update={"error": EMPTY_ANSWER, "output": None})
    return item


def run_json(result: RunResult, item: ItemResult | None = None) -> dict[str, Any]:
    """`{run_id, agent, output, error, usage, iterations, steps}` of a one-question run; with an
    output schema, `output` is the answer itself (JSON), not its text."""
    item = item or result.items[0]
    return {
        "run_id": result.run_id,
        "agent": result.agent,
        "output": item.structured if item.structured is not None else item.output,
        "error": item.error,
        "usage": result.usage.model_dump(),
        "iterations": result.iterations,
        "steps": _steps(item.steps or []),
    }


def run_error_json(
    run_id: str | None,
    agent: str,
    exc: BaseException,
    state: RunState | None = None,
    **more: JsonValue,
) -> str:
    """The one JSON object `--json` prints for a run that failed before it returned: the keys
    of `run_json`, with the usage, iterations and steps of `state` (its last checkpoint) when
    at hand, else null and empty (`run_id` null: no run was stored, the store failed).
    Bad input (exit 2) prints none: nothing ran."""
    usage, iterations, steps = so_far(state)
    shown = {
        "run_id": run_id,
        "agent": agent,
        "output": None,
        "error": str(exc),
        "usage": usage,
        "iterations": iterations,
        "steps": _steps(steps),
        **more,
    }
    return json.dumps(shown, ensure_ascii=False)


def so_far(
    state: RunState | None,
) -> tuple[dict[str, Any] | None, int | None, list[ToolCallStep]]:
    """The usage, iterations and (first item's) steps of a run's last checkpoint; None, None
    and none when it is not at hand."""
    if state is None:
        return None, None, []
    exchange = state.response or state.request
    metadata = exchange.metadata if exchange is not None else AgentRequestMetadata()
    usage = spent(state).model_dump()  # its sub-agents' calls too
    steps = build_steps(state.response, 0) or metadata.previous_steps.get(0, [])
    return usage, metadata.iteration_count, steps


def _steps(steps: Sequence[ToolCallStep]) -> list[dict[str, Any]]:
    return [
        {
            "call_id": step.tool_call_id,
            "tool": step.tool,
            "input": step.tool_input,
            "observation": step.observation,
        }
        for step in steps
    ]
