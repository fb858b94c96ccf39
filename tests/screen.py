"""What a terminal would show of the bytes written to it: enough of a VT100 to check that the
status line, a streamed answer and the lines around them end up where a person sees them; and
everything a pseudo-terminal's other side was sent (`read_all`)."""

from __future__ import annotations

import os
import re
import select
import time

from rich.cells import get_character_cell_size

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
"""A terminal's control sequences, to read what it shows as text."""


class Screen:
    """Rows of text and a cursor, fed what a program wrote (stdout and stderr alike)."""

    def __init__(self, width: int = 100) -> None:
        self.width = width
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.column = 0

    def feed(self, text: str) -> Screen:
        at = 0
        while at < len(text):
            found = _CSI.match(text, at)
            if found is not None:
                self._control(found.group(1), found.group(2))
                at = found.end()
                continue
            self._put(text[at])
            at += 1
        return self

    @property
    def lines(self) -> list[str]:
        """The rows as text, trailing spaces and empty last rows dropped."""
        shown = ["".join(row).rstrip() for row in self.rows]
        while shown and not shown[-1]:
            shown.pop()
        return shown

    def _put(self, char: str) -> None:
        if char == "\n":
            self.row += 1
            self.column = 0  # a terminal's onlcr: \n is \r\n
            self._reach(self.row)
        elif char == "\r":
            self.column = 0
        elif char == "\x1b":
            pass  # an escape this screen does not know, left as the rest of its text
        elif char == "\t":  # to the next stop (every 8 columns), never past the last column
            if self.column < self.width:
                self.column = min(self.column // 8 * 8 + 8, self.width - 1)
        else:
            cells = get_character_cell_size(char)  # 2 for a wide (CJK) character, as xterm's
            if cells == 0:  # a combining mark: on the character before it
                row = self.rows[self.row]
                if 0 < self.column <= len(row):
                    row[self.column - 1] += char
                return
            if self.column + cells > self.width:  # wrap: a wide character moves whole
                self.row += 1
                self.column = 0
                self._reach(self.row)
            row = self.rows[self.row]
            row.extend(" " * (self.column + cells - len(row)))
            row[self.column : self.column + cells] = [char, *[""] * (cells - 1)]
            self.column += cells

    def _control(self, params: str, final: str) -> None:
        number = int(params) if params.isdigit() else 1
        if final == "A":
            self.row = max(0, self.row - number)
        elif final == "B":
            self.row += number
            self._reach(self.row)
        elif final == "C":
            self.column += number
        elif final == "D":
            self.column = max(0, self.column - number)
        elif final == "G":
            self.column = number - 1
        elif final == "K":
            row = self.rows[self.row]
            if params in ("2",):
                row.clear()
            elif params in ("", "0"):
                del row[self.column :]
        # m (colours), h and l (cursor shown, hidden): nothing to see

    def _reach(self, row: int) -> None:
        while len(self.rows) <= row:
            self.rows.append([])


def read_all(fd: int, encoding: str = "ascii") -> str:
    """What a terminal's other side was sent, until it closed."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the other side is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(encoding)


def read_until(fd: int, wanted: str, timeout: float = 30) -> str:
    """What a terminal shows, read until `wanted` appears (AssertionError after `timeout`)."""
    shown = ""
    deadline = time.monotonic() + timeout
    while wanted not in ANSI.sub("", shown):
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"{wanted!r} did not appear within {timeout} s: {shown[-300:]!r}"
        shown += os.read(fd, 4096).decode(errors="replace")
    return shown


class Terminal:
    """The terminal side of a pty: what the program shows on it, read as it comes."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.shown = ""

    def until(self, text: str, *, count: int = 1, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while self.shown.count(text) < count:
            left = max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.fd], [], [], left)
            assert ready, f"{text!r} ({count}) not shown within {timeout} s: {self.shown!r}"
            self.shown += os.read(self.fd, 4096).decode(errors="replace")

    def type(self, line: str) -> None:
        os.write(self.fd, f"{line}\n".encode())
