"""Text from elsewhere (an MCP server, a remote client, a model) made safe for a terminal."""

from __future__ import annotations

import codecs
import re
from typing import Any

__all__ = ["encodes_all", "printable"]

_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Control characters but newline and tab (C0, DEL, C1: ESC starts the sequences that set a
terminal's title or clear it, CR rewrites a line), and the bidi overrides that reorder it."""


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as an escape (ESC as
    `\\x1b`, CR as `\\x0d`): whatever a tool, server or caller sent, a terminal or log shows
    it as text and takes no command from it. Use it on every line the gateway prints with
    text it did not write itself."""
    return _CONTROL.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def encodes_all(stream: Any) -> bool:
    """Whether text `stream`'s encoding writes every character (a UTF): not ASCII or
    Latin-1, where JSON is written with `\\u` escapes and other text may be escaped. A
    stream that names no encoding (an in-memory one) takes any text."""
    encoding = getattr(stream, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        return codecs.lookup(encoding).name.startswith("utf")  # utf-8, utf-16-le, ...
    except LookupError:
        return False
