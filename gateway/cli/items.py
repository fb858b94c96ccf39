"""`run --items FILE.jsonl`: many questions in one run, one JSON line each way.

In: a JSON string per line, or `{"prompt": ..., "session_id": ...}`; an empty prompt is bad
input. Out: one line per item, in order, `{"index": N, "output": ..., "error": ...}` (`output`
is the answer itself, as JSON, for agents with an output schema); any item failed: a line on
stderr says how many, and exit code 1.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import anyio.to_thread
from pydantic import ValidationError

from agent import AgentItem

from ..errors import GatewayError
from ..run_state import RunResult
from .exits import FAILED, OK
from .output import result_json, result_stdout

__all__ = ["print_items", "read_items", "read_stdin"]


async def read_stdin(what: str) -> str:
    """All of stdin. Read in a thread that Ctrl-C abandons: a read blocking the event loop
    would let the first Ctrl-C go unheard and the second raise inside it. On a terminal,
    first a line saying what is awaited, and how to end it."""
    if sys.stdin.isatty():
        print(f"reading {what} from stdin (end it with Ctrl-D)", file=sys.stderr, flush=True)
    return await anyio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)


async def read_items(path: str) -> list[AgentItem]:
    """The items in `path` (`-`: stdin). Raises `GatewayError` naming the line at fault."""
    try:
        if path == "-":
            text = await read_stdin("the items, one JSON line each,")
        else:
            text = await anyio.Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise GatewayError(f"cannot read items {path}: {exc.strerror}") from exc
    items: list[AgentItem] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value: Any = json.loads(line)
            item = (
                AgentItem(prompt=value)
                if isinstance(value, str)
                else AgentItem.model_validate(value)
            )
        except (json.JSONDecodeError, ValidationError) as exc:
            raise GatewayError(
                f"{path}:{number}: an item is a JSON string or "
                f'{{"prompt": "...", "session_id": "..."}}: {exc}'
            ) from exc
        if not item.prompt.strip():  # as an agent called as a tool refuses it
            raise GatewayError(f"{path}:{number}: the item's prompt is empty (or only spaces)")
        items.append(item)
    if not items:
        raise GatewayError(f"{path}: no items")
    return items


def print_items(result: RunResult) -> int:
    """One JSON line per item on stdout; if any failed, a line on stderr that says how many
    (and the first one's error): the exit code is 1 then."""
    for index, item in enumerate(result.items):
        output = item.structured if item.structured is not None else item.output
        line: dict[str, Any] = {"index": index, "output": output, "error": item.error}
        print(result_json(line), flush=True, file=result_stdout())
    failed = [
        (index, item.error) for index, item in enumerate(result.items) if item.error is not None
    ]
    if not failed:
        return OK
    first, error = failed[0]
    which = f"item {first}: {error}" if len(failed) == 1 else f"the first, item {first}: {error}"
    print(f"{len(failed)} of {len(result.items)} items failed ({which})", file=sys.stderr)
    return FAILED
