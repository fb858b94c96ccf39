"""Tool descriptions cut to the length an OpenAI-style server takes.

OpenAI documents a function's `description` as at most 1,024 characters, and a request with a
longer one is refused whole ("Invalid 'tools[3].function.description': string too long.
Expected a string with maximum length 1024, ..."). Newer OpenAI models have been seen to take
longer ones, and servers in front of OpenAI models (Azure, proxies) refuse them still. The
Responses API words an over-long string as chat completions does, under its own path
("Invalid 'input[95].call_id': string too long. Expected a string with maximum length 64,
..."), and its functions are flat: a refused description is `tools[3].description` there.
Both are read. So a description goes whole until the server refuses one; from then on each
over the length it named is cut to it (`fitted`): the head of the tool's own description
(where what it does is said), a marker, then whole the gateway's note on the forms its
arguments take, which its parameters cannot say.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ModelHTTPError
from .schema import described

__all__ = ["CUT_MARK", "fitted", "refused_length"]

CUT_MARK = " [...]"
_REFUSAL = re.compile(
    r"(?:function\.|tools\[\d+\]\.)description\W+string too long\b.*?maximum length (\d+)", re.S
)
_WORD_ROOM = 80
"""How far back a cut goes to end at a space rather than inside a word."""


def refused_length(error: ModelHTTPError) -> int | None:
    """The longest tool description the server takes, when `error` refused a longer one."""
    if not 400 <= error.status_code < 500:
        return None
    found = _REFUSAL.search(f"{error} {error.provider_message or ''}")
    return int(found.group(1)) if found else None


def fitted(description: str, schema: Mapping[str, Any], limit: int) -> str:
    """What `described` says of a tool, in at most `limit` characters."""
    whole = described(description, schema)
    if len(whole) <= limit:
        return whole
    note = described("", schema)
    tail = f"{CUT_MARK}\n\n{note}" if note else CUT_MARK
    if limit - len(tail) < limit // 4:
        return _head(whole, limit - len(CUT_MARK)) + CUT_MARK  # a long note is cut too
    return _head(description, limit - len(tail)) + tail


def _head(text: str, room: int) -> str:
    """At most `room` characters from the start of `text`, ending at a space if one is near."""
    head = text[: max(room, 0)]
    space = head.rfind(" ", max(len(head) - _WORD_ROOM, 0))
    return (head[:space] if space > 0 else head).rstrip()
