"""Text that can be written as UTF-8: a lone UTF-16 surrogate becomes U+FFFD.

JSON may carry `"\\ud800"` alone (a JavaScript server that cut a string in the middle of an
emoji sends it), and Python reads it as a string no UTF-8 encoder takes: printing it, sending
it to a model, storing it or writing it as JSON with pydantic all fail. A call passed through
relays the server's JSON as it came (`json_bytes` writes such a character as the escape it
came as); everywhere else a result is read, its lone surrogates are U+FFFD, the character
Unicode has for what could not be read.
"""

from __future__ import annotations

import re
from typing import Any, cast

from mcp_types import CallToolResult
from pydantic import BaseModel

__all__ = ["has_lone_surrogate", "well_formed", "well_formed_result"]

REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
_SURROGATE = re.compile("[\\ud800-\\udfff]")


def well_formed(value: Any) -> Any:
    """`value` (JSON data: strings, lists, dicts) with each lone surrogate in its strings and
    keys replaced by U+FFFD; the same object where there is none."""
    if not has_lone_surrogate(value):
        return value
    return _replaced(value)


def well_formed_result(result: CallToolResult) -> CallToolResult:
    """`result` with each lone surrogate in it (its text, structured content, `_meta`...)
    replaced by U+FFFD; the same object where there is none (the usual case: a walk, no copy).
    The fields the server sent are kept, and only they."""
    if not has_lone_surrogate(result):
        return result
    sent = result.model_dump(by_alias=True, exclude_unset=True)
    return CallToolResult.model_validate(_replaced(sent), by_name=False)


def has_lone_surrogate(value: object) -> bool:
    """Whether a string in `value` (JSON data, or pydantic models of it) has a surrogate."""
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        fields = cast(dict[object, object], value)
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in fields.items())
    if isinstance(value, list | tuple):
        return any(has_lone_surrogate(item) for item in cast(list[object], value))
    if isinstance(value, BaseModel):
        return has_lone_surrogate(value.__dict__) or has_lone_surrogate(
            value.__pydantic_extra__ or {}
        )
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        fields = cast(dict[Any, Any], value)
        return {_replaced(k): _replaced(v) for k, v in fields.items()}
    if isinstance(value, list | tuple):
        return [_replaced(item) for item in cast(list[Any], value)]
    return value
