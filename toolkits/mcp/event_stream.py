"""The data of server-sent events, read from a response body's pieces as they arrive.

Bytes all the way: a 1 MB answer is one `data:` line, and decoding it to text, cutting its
prefix off and joining it again each copied it (a tenth of a 1 MB call passed through); the
JSON reader takes the bytes as they are. Lines end at LF, CRLF or CR (a CR ending one piece
and an LF opening the next are one line end); an event ends at an empty line, its `data:`
lines joined by LF. Only a `message` event (no `event:` field, or `event: message`) carries a
JSON-RPC message: another type (a `ping` keep-alive) is skipped, as the SDK client skips it.
`id` and `retry` are kept for resuming a stream the server closed (`last_id`, `retry`);
comments and other fields are skipped, as is an event the stream ends before its empty line
(its `id` too: its data was never read).
"""

from __future__ import annotations

__all__ = ["AnswerTooLarge", "EventData"]

_MESSAGE_TYPE = frozenset({b"event: message", b"event:message", b"event:", b"event: ", b"event"})
"""The `event` lines that leave an event a `message` (an empty type is `message`)."""

_SPLIT_BELOW = 4096
"""Pieces shorter than this are cut into lines by `splitlines`, the fastest for short lines;
longer ones by `find` (memchr): `splitlines` steps through every byte in C, 1 ms for a 1 MB
line here."""


class AnswerTooLarge(ValueError):
    """A message larger than the limit (`max_message_bytes`), as a server-sent event or a JSON
    body: not malformed, too large."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        super().__init__(f"a message is larger than the {limit} byte limit")
        self.limit = limit
        self.size = size
        """The message's size, when it was read to its end (a stdout line)."""


class EventData:
    """Feed it the body's pieces in order; each `feed` returns the events completed by it."""

    def __init__(self, max_event_bytes: int) -> None:
        self._max = max_event_bytes
        self._line: list[bytes] = []
        """Pieces of a line not ended yet."""
        self._line_size = 0
        self._after_cr = False
        self._data: list[bytes] = []
        self._size = 0
        self._marked = False
        """Whether the event being read has an `id`, or an `event` line other than `message`."""
        self._other = False
        """Whether the event being read is of a type other than `message`."""
        self._id: str | None = None
        """The last `id` read, taken as `last_id` when its event ends."""
        self.last_id: str | None = None
        """The `id` of the last event ended (an `id` holds for the events after it), if any:
        where a stream closed is resumed (`Last-Event-ID`)."""
        self.retry: int | None = None
        """The server's `retry`: how many milliseconds to wait before resuming, if it said."""

    def feed(self, piece: bytes) -> list[bytes]:
        """The data of each event that `piece` ends. Raises `AnswerTooLarge` past the limit."""
        if self._after_cr and piece.startswith(b"\n"):
            piece = piece[1:]
        self._after_cr = piece.endswith(b"\r")
        if b"\n" not in piece and b"\r" not in piece:  # memchr: a long line goes by fast
            self._pending(piece)
            return []
        lines, rest = _split(piece)
        events: list[bytes] = []
        for line in lines:
            if self._line:
                line = b"".join([*self._line, line])
                self._line, self._line_size = [], 0
            if line.startswith(b"data:"):
                self._add(line[6:] if line.startswith(b"data: ") else line[5:])
            elif not line:
                if self._marked and self._ended():
                    self._data, self._size = [], 0  # not a message
                elif self._data:
                    events.append(self._data[0] if len(self._data) == 1 else b"\n".join(self._data))
                    self._data, self._size = [], 0
            elif self._marked or line not in _MESSAGE_TYPE:
                self._field(line)
        if rest:
            self._pending(rest)
        return events

    def _field(self, line: bytes) -> None:
        """A line other than `data`: an `event`, `id` or `retry` field is noted, the rest
        (comments, other fields) skipped."""
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"event":
            self._other = value not in (b"", b"message")
            self._marked = True
        elif name == b"id":
            if b"\0" not in value:  # as the SSE spec says: such an id is ignored
                self._id = value.decode("utf-8", "replace")
                self._marked = True
        elif name == b"retry" and value.isdigit():
            self.retry = int(value)

    def _ended(self) -> bool:
        """The event marked (`_marked`) ends: its id taken, its type said. Whether it is of a
        type other than `message`."""
        other = self._other
        self._marked = self._other = False
        if self._id:  # an empty id leaves the last one, as the SDK client reads it
            self.last_id = self._id
        return other

    def _pending(self, part: bytes) -> None:
        self._line.append(part)
        self._line_size += len(part)
        if self._size + self._line_size > self._max + len(b"data: "):
            raise AnswerTooLarge(self._max)

    def _add(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._max:
            raise AnswerTooLarge(self._max)
        self._data.append(data)


def _split(piece: bytes) -> tuple[list[bytes], bytes]:
    """The lines `piece` ends (at LF, CRLF or CR), and the start of the next one."""
    if len(piece) < _SPLIT_BELOW:
        lines = piece.splitlines()  # bytes break at LF, CRLF and CR only
        return lines, b"" if piece.endswith((b"\n", b"\r")) else lines.pop()
    lines: list[bytes] = []
    begin, size = 0, len(piece)
    lf = piece.find(b"\n")
    while begin < size:
        cr = piece.find(b"\r", begin, lf if lf >= 0 else size)  # a CR only before the next LF
        if cr >= 0:
            end, begin_next = cr, cr + 2 if cr + 1 == lf else cr + 1
        elif lf >= 0:
            end, begin_next = lf, lf + 1
        else:
            break
        lines.append(piece[begin:end])
        begin = begin_next
        if 0 <= lf < begin:
            lf = piece.find(b"\n", begin)
    return lines, piece[begin:]
