"""The streamed answer's open line on a terminal (`console`): where its cursor stands, and
how long its model has been quiet, for the line below it that says so."""

from __future__ import annotations

import time

from rich.cells import get_character_cell_size

__all__ = ["QuietLine", "cursor_column"]


def cursor_column(line: str, width: int) -> int:
    """Where a terminal `width` cells wide leaves its cursor (a column from 0) after `line`
    from a row's start: a character wider than what is left of a row goes whole to the next
    (a 2-cell one in the last column leaves that empty), a tab to the next stop (every 8
    cells, the last column at most). `width`: the row is full, the next character wraps."""
    column = 0
    for char in line:
        if char == "\t":
            column = column if column == width else min(column // 8 * 8 + 8, width - 1)
            continue
        cells = get_character_cell_size(char)
        if column + cells > width:
            column = 0
        column += cells
    return column


class QuietLine:
    """The streamed answer's open line: its text so far (where the cursor stands), when its
    model last wrote, and whether a line below says it has gone quiet."""

    def __init__(self, after: float) -> None:
        self.after = after
        self.span_id: str | None = None
        self.line = ""
        self.last = time.monotonic()
        self.shown = False

    def wrote(self, span_id: str, text: str) -> None:
        self.span_id = span_id
        self.line = (self.line + text).rpartition("\n")[2]
        self.last = time.monotonic()

    def ended(self) -> None:
        self.span_id = None
        self.line = ""

    def drawn(self, status: str, column: int) -> str:
        """What draws `status` below the open line (made the first time), cleared, then
        brings the cursor back up to the text's end (`column`): relative moves, right also
        when the terminal scrolled."""
        down = "\x1b[1B\r" if self.shown else "\n"
        self.shown = True
        return f"{down}\x1b[2K{status}\x1b[1A\x1b[{column + 1}G"

    def undrawn(self, column: int) -> str:
        """What erases the line below; the cursor stays where it was (`column`)."""
        self.shown = False
        return f"\x1b[1B\r\x1b[2K\x1b[1A\x1b[{column + 1}G"

    def quiet_for(self) -> float | None:
        """How long the model has sent no text, once that is `after` or more."""
        quiet = time.monotonic() - self.last
        return quiet if self.span_id is not None and quiet >= self.after else None
