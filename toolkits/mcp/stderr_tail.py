"""What a stdio server writes to stderr: its lines (`StderrLines`), and the tail of them kept
to say why it did not start (`StderrTail`).

A line is what ends in `\n` (or `\r\n`); a `\r` alone starts it over, as a terminal shows it,
so a progress bar drawn with `\r` (tqdm, npm, downloaders) is one line, its last state, once it
ends. Of a line, the first `limit` bytes are kept and the rest dropped as it comes: memory is
bounded and each byte is looked at once, however long a line grows or never ends.

The last few lines, and before them the last lines that read like the error itself (`Error:`,
a traceback, an exception): a launcher's chatter after the error would otherwise push it out.
npm's own notices (`npm notice New minor version of npm available!`, five lines at the exit of
any `npx` server) and warnings say nothing of the server, and are left out.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["StderrLines", "StderrTail"]

_LINE_END = re.compile(rb"\r\n|\r|\n")
_NOISE = re.compile(r"npm (notice|warn)\b", re.IGNORECASE)
_ERRORISH = re.compile(r"error|exception|traceback|fatal|panic", re.IGNORECASE)
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
        if _ERRORISH.search(line):
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


class StderrLines:
    """Splits a stderr stream, read in chunks, into lines of at most `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._pending = bytearray()
        self._after_cr = False
        """A chunk ended in `\r`: a `\n` next ends the line, anything else starts it over."""

    def feed(self, chunk: bytes) -> list[bytes]:
        """The lines `chunk` ends (without their line ends)."""
        ended: list[bytes] = []
        start = 0
        if self._after_cr and chunk:
            self._after_cr = False
            if chunk.startswith(b"\n"):
                ended.append(self._take())
                start = 1
            else:
                self._pending.clear()
        for found in _LINE_END.finditer(chunk, start):
            self._keep(chunk, start, found.start())
            start = found.end()
            if found.group() != b"\r":
                ended.append(self._take())
            elif start == len(chunk):  # a `\r\n` split across reads, or a `\r`
                self._after_cr = True
            else:
                self._pending.clear()
        self._keep(chunk, start, len(chunk))
        return ended

    def finish(self) -> bytes:
        """What came after the last line end (at the stream's end)."""
        self._after_cr = False
        return self._take()

    def _keep(self, chunk: bytes, start: int, end: int) -> None:
        room = self._limit - len(self._pending)
        if room > 0 and end > start:
            self._pending += chunk[start : min(end, start + room)]

    def _take(self) -> bytes:
        line = bytes(self._pending)
        self._pending.clear()
        return line
