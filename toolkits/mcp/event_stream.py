"""The data of server-sent events, read from a response body's pieces as they arrive.

Bytes all the way: a 1 MB answer is one `data:` line, and decoding it to text, cutting its
prefix off and joining it again each copied it (a tenth of a 1 MB call passed through); the
JSON reader takes the bytes as they are. Lines end at LF, CRLF or CR (a CR ending one piece
and an LF opening the next are one line end); an event ends at an empty line, its `data:`
lines joined by LF; fields other than `data` mean nothing to JSON-RPC and are skipped, as is
an event the stream ends before its empty line.
"""

from __future__ import annotations

__all__ = ["AnswerTooLarge", "EventData"]

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
            elif not line and self._data:
                events.append(self._data[0] if len(self._data) == 1 else b"\n".join(self._data))
                self._data, self._size = [], 0
        if rest:
            self._pending(rest)
        return events

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
