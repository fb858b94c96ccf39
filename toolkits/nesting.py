"""How deep a tool result may nest: `MAX_DEPTH` levels of objects and arrays.

JSON may nest without end; what reads and writes it may not. pydantic-core's reader (jiter:
the SDK's models, `read_json`, a stored run read back) takes 200 levels, orjson and pydantic's
writers 254, Python's `json` and any recursive walk about 1,000, beyond which they raise a
RecursionError with a traceback of as many lines. A result is also kept a few levels down in
what holds it (a JSON-RPC message, a stored run). So a result nested deeper than `MAX_DEPTH`
(real tools' are rarely 20 deep) is that one call's error, wherever a result is read: the
engine's walk of it (`well_formed_result`), a result passed through (`too_deep`), and a
message no reader took (`text_too_deep`, which still finds the request it answers).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import cast

from pydantic import BaseModel

__all__ = ["MAX_DEPTH", "TooDeep", "nesting", "text_too_deep", "too_deep"]

MAX_DEPTH = 100
"""Levels a result may nest (the result object itself is one)."""

_CONTAINERS = (dict, list, tuple, BaseModel)
_JSON = (dict, list)
# A string whole, or a run of brackets (a deep line is mostly runs: a few steps each).
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[{]+|[\]}]+')


class TooDeep(ValueError):
    """JSON nested deeper than `MAX_DEPTH` levels (`depth` of them)."""

    def __init__(self, depth: int, top: object = None) -> None:
        super().__init__(f"nested too deeply ({depth} levels; at most {MAX_DEPTH})")
        self.depth = depth
        self.top = top
        """What was read of it: the value, or its top level alone (each object or array in
        it as None) where nothing could read more; None where not even that."""

    def in_message(self) -> TooDeep:
        """The same, counted from the result (or error) of the JSON-RPC message it was."""
        return TooDeep(self.depth - 1, self.top)

    def answers(self) -> str | int | None:
        """The id of the request it answers, if it was a JSON-RPC answer (read from `top`)."""
        top: object = self.top
        top = cast(dict[str, object], top) if isinstance(top, dict) else {}
        key = top.get("id")
        if "method" in top or not isinstance(key, str | int) or isinstance(key, bool):
            return None
        return key


def nesting(value: object) -> int:
    """Levels of objects and arrays in `value` (decoded JSON, or pydantic models of it: a
    model is an object): 0 for a string or a number. A walk a level at a time, not a
    recursion, so that no depth is too much for it."""
    depth, level = 0, _containers([value])
    while level:
        depth += 1
        level = _containers(child for item in level for child in _children(item))
    return depth


def too_deep(value: object) -> TooDeep | None:
    """A `TooDeep` for `value` (decoded JSON) if it nests deeper than `MAX_DEPTH`, else None.
    A level's objects and arrays are found by their exact type, in one comprehension: a
    fifth of `nesting`'s time, a sixth of what reading and shaping a result take."""
    depth, level = 0, [value] if type(value) in _JSON else []
    while level:
        depth += 1
        if depth > MAX_DEPTH:
            return TooDeep(nesting(value), value)
        level = [
            child
            for item in cast(list[dict[str, object] | list[object]], level)
            for child in (item.values() if type(item) is dict else item)
            if type(child) in _JSON
        ]
    return None


def text_too_deep(data: bytes | str) -> TooDeep:
    """The `TooDeep` of JSON text too deep to read: its depth, and its top level as `top`
    (a JSON-RPC message's id and method), from one scan of its strings and brackets."""
    text = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    depth = deepest = 0
    kept: list[bytes] = []
    last = start = 0
    for match in _TOKEN.finditer(text):
        at, end = match.span()
        first = text[at]
        if first == 0x22:  # '"'
            continue
        steps = end - at
        if first in b"[{":
            if depth < 2 <= depth + steps:  # a member of the top level opens
                start = at + 1 - depth
            depth += steps
            deepest = max(deepest, depth)
        else:
            if depth - steps < 2 <= depth:  # ... and closes: it is left out
                kept += (text[last:start], b"null")
                last = at + depth - 1
            depth -= steps
    kept.append(text[last:])
    try:
        top: object = json.loads(b"".join(kept))
    except (ValueError, RecursionError):  # not JSON after all
        top = None
    return TooDeep(deepest, top)


def _containers(items: Iterable[object]) -> list[object]:
    return [item for item in items if isinstance(item, _CONTAINERS)]


def _children(item: object) -> Iterable[object]:
    if isinstance(item, dict):
        return cast(dict[object, object], item).values()
    if isinstance(item, BaseModel):
        return [*item.__dict__.values(), *(item.__pydantic_extra__ or {}).values()]
    return cast(list[object], item)
