"""What a stdio server writes to stderr: its lines (`StderrLines`), and the tail of them kept
to say why it did not start (`StderrTail`).

A line is what ends in `\n`. Of a line, the first `limit` bytes are kept and the rest dropped
as it comes, so memory is bounded and each byte is looked at once however long a line grows or
if it never ends (a progress bar drawn with `\r`: tqdm, npm, downloaders). A `\r` is no line
end: the log shows what the server wrote, a `\r` written out as `\r`, never a line a `\r` overwrote.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["StderrLines", "StderrTail"]

_NOISE = re.compile(r"npm (notice|warn)\b", re.IGNORECASE)
_GAP = "..."


class StderrTail:
    """The lines of a server's stderr worth quoting: at most `last` of the latest, and the
    latest `errors` older ones that look like errors, in the order they came."""

    def __init__(self, last: int = 5, errors: int = 3) -> None:
        self._last: deque[tuple[int, str]] = deque(maxlen=last)
        self._errors: deque[tuple[int, str]] = deque(maxlen=errors)
        self._count = 0

    def append(self, line: str) -> None:
        if _NOISE.match(line):
            return
        self._count += 1
        if _errorish(line.lower()):
            self._errors.append((self._count, line))
        self._last.append((self._count, line))

    def __bool__(self) -> bool:
        return bool(self._last)

    def lines(self) -> list[str]:
        """The kept lines, oldest first, with `...` where lines in between were dropped."""
        kept = sorted(dict([*self._errors, *self._last]).items())
        shown: list[str] = []
        previous = 0
        for number, line in kept:
            if shown and number != previous + 1:
                shown.append(_GAP)
            shown.append(line)
            previous = number
        return shown

    def __str__(self) -> str:
        return " | ".join(self.lines())


def _errorish(lowered: str) -> bool:
    """Whether a line, lowered, looks like an error. Plain `in`: a case-blind regex of these
    words took ~50 us a 1 KB line, most of the cost of a server flooding its stderr."""
    return (
        "error" in lowered
        or "exception" in lowered
        or "traceback" in lowered
        or "fatal" in lowered
        or "panic" in lowered
    )


class StderrLines:
    """Splits a stderr stream, read in chunks, into lines of at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` ends (without their `\n`)."""
        ended: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk, start, end)
            ended.append(self.finish())
            start = end + 1
        self._keep(chunk, start, len(chunk))
        return ended

    def finish(self) -> bytes:
        """The line so far (at its end, or the stream's)."""
        line = bytes(self._pending)
        self._pending.clear()
        return line

    def _keep(self, chunk: bytes, start: int, end: int) -> None:
        room = self._limit - len(self._pending)
        if room > 0 and end > start:
            self._pending += chunk[start : min(end, start + room)]
