"""`run --items FILE.jsonl`: many questions in one run, one JSON line each way.

In: a JSON string per line, or `{"prompt": ..., "session_id": ...}`; an empty prompt is bad
input. Out: one line per item as soon as it finishes (in the order they finish; `index` says
which), `{"index": N, "output": ..., "error": ...}` (`output` is the answer itself, as JSON,
for agents with an output schema), so a run that stops or is interrupted has printed what
finished. With `--json`, a last line for the run: `{"run_id", "agent", "status", "error",
"items", "finished", "failed", "usage", "iterations"}` (no `index`; `status` as `run --json`
words it), also when it stopped. Any item failed: a line on stderr says how many, and exit
code 1. A line's object may give the item's own `"context": {...}` too.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import anyio
from pydantic import ValidationError

from agent import AgentItem, ItemResult
from agent.memory.base import session_key_error
from agent.model_json import read_model_json

from ..config_errors import describe
from ..errors import GatewayError
from ..run_state import RunResult, RunState
from ..trace import TraceEvent
from .exits import FAILED, OK
from .output import result_json, result_stdout
from .results import ended_status, so_far
from .stdin_text import not_utf8, read_stdin

__all__ = ["ItemLines", "read_items"]


async def read_items(path: str) -> list[AgentItem]:
    """The items in `path` (`-`: stdin). Raises `GatewayError` naming the line at fault."""
    try:
        if path == "-":
            text = await read_stdin("the items, one JSON line each,")
        else:
            text = await anyio.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise GatewayError(f"cannot read items {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        said = not_utf8(exc.object, exc.start)
        raise GatewayError(f"items file {path} is not valid text: {said}") from None
    items: list[AgentItem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            items.append(_item(f"{path}:{number}", line))
    if not items:
        raise GatewayError(f"{path}: no items")
    return items


_SHAPE = 'an item is a JSON string or {"prompt": "...", "session_id": "...", "context": {...}}'


def _item(where: str, line: str) -> AgentItem:
    """The item a line gives; `GatewayError` starting with `where` (the file and line)."""
    try:
        value: Any = read_model_json(line)  # NaN, Infinity: bad input, as in --context
    except ValueError as exc:
        raise GatewayError(f"{where}: {_SHAPE}: {exc}") from exc
    if not isinstance(value, str | dict):
        raise GatewayError(f"{where}: {_SHAPE}, not {_json_kind(value)}")
    try:
        item = (
            AgentItem(prompt=value) if isinstance(value, str) else AgentItem.model_validate(value)
        )
    except ValidationError as exc:  # in the words config errors use, each key named
        raise GatewayError(f"{where}: {describe(exc, AgentItem, {})}") from exc
    if not item.prompt.strip():  # as an agent called as a tool refuses it
        raise GatewayError(f"{where}: the item's prompt is empty (or only spaces)")
    # Refused before anything runs, as `--session` is: found by the run, it stopped a stored
    # run that every resume then stopped the same way.
    if item.session_id is not None:
        problem = session_key_error(item.session_id)
        if problem is not None:
            raise GatewayError(f"{where}: bad session id {item.session_id[:40]!r}: {problem}")
    return item


def _json_kind(value: object) -> str:
    """What a JSON value is, in JSON's words."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    return "an array" if isinstance(value, list) else "a number"


class ItemLines:
    """`run --items` output: a trace hook that prints each item's JSON line as the item
    finishes; `finished` prints those the trace did not tell (a resumed run's earlier ones)
    and, with `summary` (`--json`), the run's line."""

    def __init__(self, run_id: str | None, agent: str, count: int, *, summary: bool) -> None:
        self._run_id = run_id
        self._agent = agent
        self._count = count
        self._summary = summary
        self._out: TextIO | None = None
        """Where the lines go: `result_stdout()` unless `writing_to` says."""
        self._own_agent: set[str] = set()
        """The run's own agent span: a sub-agent's items are not the run's."""
        self._printed: dict[int, ItemResult] = {}

    def writing_to(self, out: TextIO) -> ItemLines:
        """This, writing its lines to `out` (around a terminal's status line)."""
        self._out = out
        return self

    async def __call__(self, event: TraceEvent) -> None:
        if event.kind != "agent":
            return
        if event.phase == "start" and event.parent_id == event.run_id:
            self._own_agent.add(event.id)
        elif event.phase == "note" and event.finished_item is not None:
            noted = event.output if isinstance(event.output, dict) else {}
            index = noted.get("item")
            if event.parent_id in self._own_agent and isinstance(index, int):
                self._print(index, event.finished_item)

    def finished(self, result: RunResult) -> int:
        """The lines not printed yet (in order), the run's line with `summary`, and on stderr
        how many items failed; the exit code."""
        for index, item in enumerate(result.items):
            if index not in self._printed:
                self._print(index, item)
        # An empty answer is its item's failure already (the step loop made it so).
        items = result.items
        failed = [(index, item.error) for index, item in enumerate(items) if item.error is not None]
        if self._summary:
            self._print_run(
                ended_status(result),  # as the run store says
                None,
                len(failed),
                result.usage.model_dump(),
                result.iterations,
            )
        if not failed:
            return OK
        first, error = failed[0]
        which = (
            f"item {first}: {error}" if len(failed) == 1 else f"the first, item {first}: {error}"
        )
        print(f"{len(failed)} of {len(items)} items failed ({which})", file=sys.stderr)
        return FAILED

    def stopped(
        self,
        run_id: str | None,
        status: str,
        error: str,
        state: RunState | None,
        **more: Any,
    ) -> None:
        """With `summary`, the run's line for a run that ended before it returned (`status`:
        `stopped`, `cancelled`, `waiting_approval`, ...; `run_id` None: none was stored), with
        what `state` (its last checkpoint) says it spent."""
        if not self._summary:
            return
        self._run_id = run_id
        failed = sum(1 for item in self._printed.values() if item.error is not None)
        usage, iterations, _ = so_far(state)
        self._print_run(status, error, failed, usage, iterations, **more)

    def _print(self, index: int, item: ItemResult) -> None:
        self._printed[index] = item
        output = item.structured if item.structured is not None else item.output
        line: dict[str, Any] = {"index": index, "output": output, "error": item.error}
        if item.handoff is not None:  # the agent whose answer it is
            line["handoff"] = item.handoff
        self._write(line)

    def _print_run(
        self,
        status: str,
        error: str | None,
        failed: int,
        usage: dict[str, Any] | None,
        iterations: int | None,
        **more: Any,
    ) -> None:
        self._write(
            {
                "run_id": self._run_id,
                "agent": self._agent,
                "status": status,
                "error": error,
                "items": self._count,
                "finished": len(self._printed),
                "failed": failed,
                "usage": usage,
                "iterations": iterations,
                **more,
            }
        )

    def _write(self, line: dict[str, Any]) -> None:
        out = self._out if self._out is not None else result_stdout()
        out.write(result_json(line) + "\n")  # `\\u` escapes where stdout cannot write a character
        out.flush()
