"""Warnings a misbehaving server could repeat without end (a line on stdout that is not
JSON-RPC, an answer to no request): the first few at WARNING, the last of them saying so, the
rest at DEBUG, so one chatty server cannot flood the gateway's log."""

from __future__ import annotations

import logging

__all__ = ["FewWarnings"]


class FewWarnings:
    """Warnings of one kind on `log`: the first `SAID` at WARNING, the others at DEBUG;
    `further` (the kind, plural: "lines") names them in the last warning."""

    SAID = 5

    def __init__(self, log: logging.Logger, further: str) -> None:
        self._log = log
        self._further = further
        self.count = 0

    def warn(self, message: str, *args: object) -> None:
        """`message % args`, at WARNING while few have been said."""
        self.count += 1
        if self.count > self.SAID:
            self._log.debug(message, *args)
            return
        last = (
            f"; further such {self._further} are logged at DEBUG" if self.count == self.SAID else ""
        )
        self._log.warning(message + "%s", *args, last)
