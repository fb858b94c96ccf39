"""Text that can be written as UTF-8: a lone UTF-16 surrogate becomes U+FFFD.

JSON may carry `"\\ud800"` alone (a JavaScript server that cut a string in the middle of an
emoji sends it), and Python reads it as a string no UTF-8 encoder takes: printing it, sending
it to a model, storing it or writing it as JSON with pydantic all fail. A call passed through
relays the server's JSON as it came (`json_bytes` writes such a character as the escape it
came as); everywhere else a result is read, its lone surrogates are U+FFFD, the character
Unicode has for what could not be read. The walk that looks for them is bounded by how deep a
result may nest (`nesting.MAX_DEPTH`), and raises `TooDeep` beyond.
"""

from __future__ import annotations

import re
from typing import Any, cast

from mcp_types import CallToolResult
from pydantic import BaseModel

from .nesting import MAX_DEPTH, TooDeep, nesting

__all__ = ["has_lone_surrogate", "well_formed", "well_formed_result"]

REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
_SURROGATE = re.compile("[\\ud800-\\udfff]")


def well_formed(value: Any) -> Any:
    """`value` (JSON data: strings, lists, dicts) with each lone surrogate in its strings and
    keys replaced by U+FFFD; the same object where there is none. Raises `TooDeep` for a
    value nested deeper than `MAX_DEPTH`."""
    if not has_lone_surrogate(value):
        return value
    return _replaced(value)


def well_formed_result(result: CallToolResult) -> CallToolResult:
    """`result` with each lone surrogate in it (its text, structured content, `_meta`...)
    replaced by U+FFFD; the same object where there is none (the usual case: a walk, no copy).
    The fields the server sent are kept, and only they. Raises `TooDeep` for a result nested
    deeper than `MAX_DEPTH`: the same walk bounds it (`nesting`)."""
    if not has_lone_surrogate(result):
        return result
    sent = result.model_dump(by_alias=True, exclude_unset=True)
    return CallToolResult.model_validate(_replaced(sent), by_name=False)


def has_lone_surrogate(value: object) -> bool:
    """Whether a string in `value` (JSON data, or pydantic models of it) has a surrogate.
    Raises `TooDeep` for a value nested deeper than `MAX_DEPTH`."""
    try:
        return _has_surrogate(value, MAX_DEPTH)
    except _Deeper:
        raise TooDeep(nesting(value), value) from None


class _Deeper(Exception):
    """The walk went deeper than it may (measured again, whole, by `nesting`)."""


def _has_surrogate(value: object, room: int) -> bool:
    """`has_lone_surrogate`, with `room` levels of objects and arrays left to go into."""
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if not isinstance(value, dict | list | tuple | BaseModel):
        return False
    if not room:
        raise _Deeper
    room -= 1
    if isinstance(value, dict):
        fields = cast(dict[object, object], value)
        return any(_has_surrogate(k, room) or _has_surrogate(v, room) for k, v in fields.items())
    if isinstance(value, BaseModel):
        extra = value.__pydantic_extra__ or {}
        return any(_has_surrogate(v, room) for v in value.__dict__.values()) or any(
            _has_surrogate(k, room) or _has_surrogate(v, room) for k, v in extra.items()
        )
    return any(_has_surrogate(item, room) for item in cast(list[object], value))


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        fields = cast(dict[Any, Any], value)
        return {_replaced(k): _replaced(v) for k, v in fields.items()}
    if isinstance(value, list | tuple):
        return [_replaced(item) for item in cast(list[Any], value)]
    return value
