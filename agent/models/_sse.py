"""A server-sent events decoder (the WHATWG event-stream format): `SSELines` cuts the text into
lines, `SSEDecoder` turns lines into events.

A line ends at CR, LF or CRLF only, as the format says. Python's `splitlines` (and httpx's
`aiter_lines`, built on it) also ends one at U+2028, U+2029, U+0085 and four control
characters, which JSON lets a string hold as they are (vLLM, llama.cpp and other servers send
them so): such a cut leaves half an event's JSON in a `data:` line.

One departure from the standard, which ignores unknown field names: an `error:` field line is
an event named `error` carrying that value. llama.cpp's server (builds before mid-2025) sends
its failures so, `error: {"code": 400, "message": ...}` then `data: [DONE]`; ignored, the
failure read as an empty answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINE_END = re.compile("\r\n|\r|\n")


@dataclass(slots=True)
class SSELines:
    """Cuts text, as it comes in pieces, into lines (without their line ending)."""

    _pending: list[str] = field(default_factory=list[str])
    """The start of a line whose end has not come yet."""
    _after_cr: bool = False
    """Whether the last piece ended in CR, whose LF may start the next piece (one CRLF)."""

    def feed(self, piece: str) -> list[str]:
        """The lines `piece` ends."""
        if not piece:
            return []
        if self._after_cr and piece[0] == "\n":
            piece = piece[1:]
        self._after_cr = piece.endswith("\r")
        *ended, rest = _LINE_END.split(piece)
        if not ended:
            self._pending.append(rest)
            return []
        ended[0] = "".join([*self._pending, ended[0]])
        self._pending = [rest] if rest else []
        return ended


@dataclass(frozen=True, slots=True)
class SSEEvent:
    event: str
    data: str


@dataclass(slots=True)
class SSEDecoder:
    """Turns lines (without their line ending) into events; a blank line ends an event."""

    _event: str = ""
    _data: list[str] = field(default_factory=list[str])

    def feed(self, line: str) -> SSEEvent | None:
        if not line:
            return self.flush()
        if line.startswith(":"):
            return None  # a comment, used by servers as keep-alive
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "error":
            self._event = "error"
            self._data.append(value)
        return None  # `id` and `retry` do not matter for one-shot responses

    def flush(self) -> SSEEvent | None:
        """The pending event, if any, which a blank line ended. At the end of the stream an
        event not so ended is not flushed but dropped, as the format says: the stream was cut
        inside it."""
        if not self._data and not self._event:
            return None
        event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
        self._event = ""
        self._data = []
        return event if event.data else None
