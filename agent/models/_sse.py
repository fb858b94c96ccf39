"""A server-sent events decoder fed line by line (the WHATWG event-stream format).

One departure from the standard, which ignores unknown field names: an `error:` field line is
an event named `error` carrying that value. llama.cpp's server (builds before mid-2025) sends
its failures so, `error: {"code": 400, "message": ...}` then `data: [DONE]`; ignored, the
failure read as an empty answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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
        """The pending event, if any: also called at the end of the stream."""
        if not self._data and not self._event:
            return None
        event = SSEEvent(event=self._event or "message", data="\n".join(self._data))
        self._event = ""
        self._data = []
        return event if event.data else None
