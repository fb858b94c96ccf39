"""JSON on the wire, fast: what a call passed through reads and writes as it is.

Writing: orjson writes a 1 MB tool result in a fraction of the standard library's time (it was
a third of the gateway's CPU per 1 MB call passed through); what orjson refuses (an integer
beyond 64 bits, a key that is not a string, a lone UTF-16 surrogate) is written by `json`
instead. A lone surrogate (`"\\ud800"` in the JSON it was read from: a JavaScript server that
cut a string in the middle of an emoji sends it) is written as that escape again, so what is
relayed is what came; UTF-8 has no bytes for it.

Reading: jiter (pydantic-core's reader) reads a 1 MB ASCII answer in a tenth of `json`'s time
(it was the largest share of a 1 MB call passed through) and a small message in a third;
whatever else it refuses (a lone surrogate, a byte-order mark, and everything that is not
JSON) is read by `json` again, so the values and the errors are `json`'s: nothing changes but
the speed. (orjson reads integers beyond 64 bits as floats: not a candidate.) Nesting beyond
jiter's 200 levels is refused (`TooDeep`, with the message's top level, its id, where that can
be read): twice what a result may nest (`nesting`), and `json` would raise a RecursionError
past ~1,000.
"""

from __future__ import annotations

import json
from typing import Any, NoReturn

import orjson
from pydantic_core import from_json

from .nesting import text_too_deep

__all__ = ["json_bytes", "read_json"]


def json_bytes(value: Any) -> bytes:
    """`value` as compact JSON, non-ASCII as UTF-8 (as `json.dumps(..., ensure_ascii=False)`)."""
    try:
        return orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError is one
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        # Only a string can hold a surrogate, and `\udXXX` is its escape there.
        return text.encode("utf-8", "backslashreplace")


def read_json(data: bytes | str, *, constants: bool = True) -> Any:
    """`json.loads(data)`: the same value, or the same error; `nesting.TooDeep` (a
    `ValueError`) for nesting beyond 200 levels. `constants=False` refuses `NaN` and
    `Infinity` (Python's, not JSON's) with a `ValueError`."""
    try:
        return from_json(data, allow_inf_nan=constants)
    except ValueError as exc:
        if str(exc).startswith(_TOO_DEEP):
            raise text_too_deep(data) from None
    try:
        return json.loads(data, parse_constant=None if constants else _no_constant)
    except RecursionError:  # deep, after what jiter refused first (a lone surrogate, say)
        raise text_too_deep(data) from None


_TOO_DEEP = "recursion limit exceeded"
"""How jiter begins the error for nesting beyond its limit."""


def _no_constant(name: str) -> NoReturn:
    raise ValueError(f"{name} is not JSON")
