"""JSON a model writes (a call's arguments, a structured answer): JSON as RFC 8259 has it,
nested at most `MAX_DEPTH` levels.

Python's `json` reads more than JSON: `NaN`, `Infinity` and `-Infinity`, and a number too
large for a float (`1e999`) as infinity. None of them can go on: written out again they are
not JSON, and a tool was given `null` in their place. Nesting has no end in JSON, but its
readers have: pydantic's (the run store's, the MCP SDK's) stops at 200 levels, `json` and any
recursive walk at about 1,000 with a RecursionError. So a model's JSON may nest as deep as a
tool's result may (100 levels, the gateway's rule for results: `toolkits.nesting`, which
this package may not import; a test holds the two equal). What breaks these rules is refused
as JSON that is not an object is: the model is told why, and calls again.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, NoReturn, cast

from .well_formed import well_formed

__all__ = ["MAX_DEPTH", "NotModelJson", "json_problem", "nesting", "read_model_json", "why_refused"]

MAX_DEPTH = 100
"""Levels of objects and arrays a model's JSON may nest (an arguments object itself is one)."""

# A string whole, or one bracket: what a scan for the depth of text no reader took needs.
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class NotModelJson(ValueError):
    """Text that `json` reads but that is no JSON a model may write; its message says why
    (`not valid JSON (NaN is not a JSON number)`, `nested too deeply (...)`)."""


def read_model_json(text: str | bytes) -> Any:
    """The JSON value of `text`, each lone surrogate in it as U+FFFD (`well_formed`). Raises
    `NotModelJson` for a constant or number JSON has not, or nesting deeper than
    `MAX_DEPTH`; a `ValueError` (`json`'s) for text that is not JSON."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_finite)
    except RecursionError:  # deeper than `json` can go: far deeper than allowed
        raise NotModelJson(_too_deep(_text_depth(text))) from None
    problem = json_problem(value)
    if problem is not None:
        raise NotModelJson(problem)
    return well_formed(value)


def json_problem(value: object) -> str | None:
    """Why `value` (decoded JSON: dicts, lists, strings, numbers) is no JSON a model may
    write, or None: it nests deeper than `MAX_DEPTH`, or holds a float that is not finite.
    A walk a level at a time, not a recursion, so that no depth is too much for it."""
    level: list[object] = [value]
    depth = 0
    while level:
        for item in level:
            if isinstance(item, float) and not math.isfinite(item):
                return f"not valid JSON ({_said(item)} is not a JSON number)"
        if any(isinstance(item, dict | list) for item in level):
            depth += 1
            if depth > MAX_DEPTH:
                return _too_deep(nesting(value))
        level = _inside(level)
    return None


def nesting(value: object) -> int:
    """Levels of objects and arrays in `value` (decoded JSON): 0 for a string or a number."""
    depth = 0
    level: list[object] = [value]
    while any(isinstance(item, dict | list) for item in level):
        depth += 1
        level = _inside(level)
    return depth


def why_refused(text: str) -> str:
    """Why `text`, a call's arguments that were refused, is not what a model may write: words
    for the model, after `were` (`not a JSON object`, `nested too deeply (...)`)."""
    try:
        read_model_json(text)
    except NotModelJson as exc:
        return str(exc)
    except ValueError:
        pass
    return "not a JSON object"


def _inside(level: list[object]) -> list[object]:
    """What the objects and arrays of `level` hold: the next level down."""
    inside: list[object] = []
    for item in level:
        if isinstance(item, dict):
            inside += cast(dict[object, object], item).values()
        elif isinstance(item, list):
            inside += cast(list[object], item)
    return inside


def _too_deep(depth: int) -> str:
    return f"nested too deeply ({depth} levels; at most {MAX_DEPTH})"


def _said(number: float) -> str:
    return "NaN" if math.isnan(number) else "Infinity" if number > 0 else "-Infinity"


def _constant(name: str) -> NoReturn:
    raise NotModelJson(f"not valid JSON ({name} is not a JSON number)")


def _finite(written: str) -> float:
    number = float(written)
    if math.isinf(number):  # `1e999`: JSON's grammar, but beyond any float
        raise NotModelJson(f"not valid JSON ({written} is too large a number)")
    return number


def _text_depth(text: str | bytes) -> int:
    """How deep the objects and arrays of JSON text nest, from a scan of its brackets."""
    source = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    depth = deepest = 0
    for match in _TOKEN.finditer(source):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in ("]", "}"):
            depth -= 1
    return deepest
