"""Text that UTF-8 can carry: each lone UTF-16 surrogate becomes U+FFFD.

JSON may hold `"\\ud83d"` alone (half an emoji, from a program that cut a string between the
two halves of a pair), and Python reads it as a string no UTF-8 encoder takes: a run holding
one could not be stored, digested, sent to an MCP server (whose reader drops the whole line,
so the call waits out its timeout) or printed. So where such text enters a run (a question,
a model's answer) each one becomes U+FFFD, the character Unicode has for what could not be
read, as `models._json.json_body` makes it for providers and the gateway for tool results
(`toolkits.well_formed`, which this package may not import).
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["well_formed", "well_formed_text"]

REPLACEMENT = "\N{REPLACEMENT CHARACTER}"
_SURROGATE = re.compile("[\\ud800-\\udfff]")


def well_formed_text(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD (`text` itself where there is none)."""
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def well_formed(value: Any) -> Any:
    """`value` (decoded JSON: strings, lists, dicts) with each lone surrogate in its strings
    and keys as U+FFFD; `value` itself where there is none (the usual case: a walk, no copy).
    A recursion: for values whose nesting is bounded already (a model's answer and its
    arguments: `model_json`)."""
    return _replaced(value) if _holds_surrogate(value) else value


def _holds_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        return not value.isascii() and _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        fields = cast(dict[Any, Any], value)
        return any(_holds_surrogate(k) or _holds_surrogate(v) for k, v in fields.items())
    if isinstance(value, list):
        return any(_holds_surrogate(item) for item in cast(list[Any], value))
    return False


def _replaced(value: Any) -> Any:
    if isinstance(value, str):
        return well_formed_text(value)
    if isinstance(value, dict):
        fields = cast(dict[Any, Any], value)
        return {_replaced(key): _replaced(item) for key, item in fields.items()}
    if isinstance(value, list):
        return [_replaced(item) for item in cast(list[Any], value)]
    return value
