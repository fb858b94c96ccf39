"""What a stdio server wrote to stderr, kept to say why it did not start.

The last few lines, and before them the last lines that read like the error itself (`Error:`,
a traceback, an exception): a launcher's chatter after the error would otherwise push it out.
npm's own notices (`npm notice New minor version of npm available!`, five lines at the exit of
any `npx` server) and warnings say nothing of the server, and are left out.
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["StderrTail"]

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
