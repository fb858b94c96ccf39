"""The data of server-sent events, read from a response body's pieces as they arrive.

Bytes all the way: a 1 MB answer is one `data:` line, and decoding it to text, cutting its
prefix off and joining it again each copied it (a tenth of a 1 MB call passed through); the
JSON reader takes the bytes as they are. Lines end at LF, CRLF or CR (a CR ending one piece
and an LF opening the next are one line end); an event ends at an empty line, its `data:`
lines joined by LF; fields other than `data` mean nothing to JSON-RPC and are skipped, as is
an event the stream ends before its empty line.
"""

from __future__ import annotations

__all__ = ["EventData"]


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
        """The data of each event that `piece` ends. Raises `ValueError` past the limit."""
        if self._after_cr and piece.startswith(b"\n"):
            piece = piece[1:]
        self._after_cr = piece.endswith(b"\r")
        events: list[bytes] = []
        begin, size = 0, len(piece)
        # Line ends are found by `find` (memchr), a CR only up to the next LF: `splitlines`
        # steps through every byte (1 ms for a 1 MB line here) and copies each line.
        lf = piece.find(b"\n")
        while begin < size:
            cr = piece.find(b"\r", begin, lf if lf >= 0 else size)
            if cr >= 0:
                end, after = cr, cr + 2 if cr + 1 == lf else cr + 1
            elif lf >= 0:
                end, after = lf, lf + 1
            else:
                break
            if self._line_ends_event(piece, begin, end):
                events.append(self._data[0] if len(self._data) == 1 else b"\n".join(self._data))
                self._data, self._size = [], 0
            begin = after
            if 0 <= lf < begin:
                lf = piece.find(b"\n", begin)
        if begin < size:
            self._pending(piece[begin:] if begin else piece)
        return events

    def _line_ends_event(self, piece: bytes, begin: int, end: int) -> bool:
        """Read the line that ends at `piece[end]` (its pending parts first); whether it is the
        empty line that ends an event with data."""
        if self._line:
            piece = b"".join([*self._line, memoryview(piece)[begin:end]])
            begin, end = 0, len(piece)
            self._line, self._line_size = [], 0
        if piece.startswith(b"data:", begin, end):
            skip = 6 if piece.startswith(b"data: ", begin, end) else 5
            self._add(piece[begin + skip : end])
            return False
        return begin == end and bool(self._data)

    def _pending(self, part: bytes) -> None:
        self._line.append(part)
        self._line_size += len(part)
        if self._size + self._line_size > self._max + len(b"data: "):
            raise ValueError(f"an event is larger than {self._max} bytes")

    def _add(self, data: bytes) -> None:
        self._size += len(data)
        if self._size > self._max:
            raise ValueError(f"an event is larger than {self._max} bytes")
        self._data.append(data)
