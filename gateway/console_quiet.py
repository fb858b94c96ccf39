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

    def quiet_for(self) -> float | None:
        """How long the model has sent no text, once that is `after` or more."""
        quiet = time.monotonic() - self.last
        return quiet if self.span_id is not None and quiet >= self.after else None
