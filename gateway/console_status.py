"""The run console's status: one line per model or tool call in flight, with its clock,
spinner and progress, and above them what the command waits for (servers starting, calls
ending after `--no-wait`) or that it is stopping. Drawn by `RunConsole` (`console.py`).

Every line is fitted to the terminal's width, never wrapped: the servers starting take one,
whatever their number (`waiting for 105 MCP servers: mini00, mini01, mini02 and 102 more
3.2 s`), and a call's progress message is cut with an ellipsis. A status taller than the
terminal leaves a copy of itself in the scrollback each time a log line clears it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from toolkits.printable import printable

from .trace import ToolProgress

__all__ = ["Call", "Status", "Waiting", "servers_named", "waiting_for_servers"]

MOST_NAMED = 10
"""The most servers a line written once names (the status names as many as fit)."""
_SPINNER_CELLS = 2
"""The spinner and the space after it, before a status line's label."""
_BAR_CELLS = 20
"""A call's progress bar, shown when the line has room for it."""


@dataclass
class Call:
    """A model or tool call in flight, as the status line shows it."""

    kind: str
    name: str
    depth: int
    started: float = field(default_factory=time.monotonic)
    done: float | None = None
    total: float | None = None
    message: str = ""
    chars: int = 0
    hidden_for: float = 0.0
    """Seconds before its line shows: what mostly takes no time does not flash by."""
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))

    def progressed(self, report: ToolProgress) -> None:
        self.done = report.progress
        self.total = report.total
        # One line, whatever a server sent: escapes shown as text, line breaks as spaces.
        self.message = " ".join(printable(report.message or "").split())


@dataclass
class Waiting:
    """MCP servers the gateway waits for before anything runs; or, once interrupted, that
    the command is stopping (since `stopping`)."""

    names: list[str] = field(default_factory=list[str])
    started: float = field(default_factory=time.monotonic)
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))
    stopping: float | None = None
    interrupted_start: list[str] = field(default_factory=list[str])
    """The servers it waited for when interrupted (none: the command had begun)."""
    stop_said: bool = False
    """The command said why it stopped (`say_stopped`)."""
    idle: bool = False
    """Nothing was under way when interrupted: no run, no call, no server starting."""
    leaving: bool = False
    """The command waits for no decision (`--no-wait`), only for the calls in flight."""


class Status:
    """The status: one line per call in flight, computed when drawn (clocks move)."""

    def __init__(self, calls: dict[str, Call], waiting: Waiting) -> None:
        self._calls = calls
        self._waiting = waiting

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        now = time.monotonic()
        rows: list[RenderableType] = []
        waiting = self._waiting
        if waiting.stopping is not None:
            label = Text("stopping…", style="bold")
            label.append(f"  {now - waiting.stopping:.1f} s", style="dim")
            grid = Table.grid(padding=(0, 1))
            grid.add_row(waiting.spinner, label)
            rows.append(grid)
        if waiting.leaving and waiting.stopping is None and self._calls:
            leaving = Text("--no-wait: returns once these end (Ctrl-C: now)", style="bold")
            leaving.truncate(options.max_width, overflow="ellipsis")
            rows.append(leaving)
        if waiting.names:
            head = waiting_for_servers(len(waiting.names))
            clock = f"  {now - waiting.started:.1f} s"
            room = options.max_width - _SPINNER_CELLS - cell_len(head) - 2 - cell_len(clock)
            label = Text(head, style="dim")
            if named := servers_named(waiting.names, room):
                label.append(": ", style="dim")
                label.append(named, style="bold")
            label.append(clock, style="dim")
            # One name longer than the line, or a terminal narrower than the rest: cut.
            label.truncate(options.max_width - _SPINNER_CELLS, overflow="ellipsis")
            grid = Table.grid(padding=(0, 1))
            grid.add_row(waiting.spinner, label)
            rows.append(grid)
        calls = [c for c in list(self._calls.values()) if now - c.started >= c.hidden_for]
        rows.extend(_call_row(call, now, options.max_width) for call in calls)
        yield Group(*rows)


def _call_row(call: Call, now: float, width: int) -> RenderableType:
    """A call's line, `width` cells at most: its label (kind, name, clock) cut if it must be,
    then its count, its bar where there is room, and the rest of the line for its message,
    cut with an ellipsis (a server's message may be a paragraph)."""
    label = Text("  " * max(call.depth - 2, 0))
    label.append(f"{call.kind} ", style="dim")
    label.append(call.name, style="bold")
    label.append(f"  {now - call.started:.1f} s", style="dim")
    if call.chars:
        label.append(f"  {call.chars} chars", style="dim")
    label.truncate(max(width - _SPINNER_CELLS, 1), overflow="ellipsis")
    room = width - _SPINNER_CELLS - label.cell_len
    cells: list[RenderableType] = [call.spinner, label]
    count = None
    if call.total:
        count = Text(f"{call.done or 0:g}/{call.total:g}")
    elif call.done is not None:
        count = Text(f"{call.done:g}")
    if count is not None and room >= 1 + count.cell_len:
        room -= 1 + count.cell_len
        if call.total and room >= 1 + _BAR_CELLS:
            cells.append(ProgressBar(total=call.total, completed=call.done or 0, width=_BAR_CELLS))
            room -= 1 + _BAR_CELLS
        cells.append(count)
    if call.message and room >= 3:  # a letter and the ellipsis, after the space
        message = Text(call.message, style="italic")
        message.truncate(room - 1, overflow="ellipsis")
        cells.append(message)
    grid = Table.grid(padding=(0, 1))
    for _ in cells:  # what is cut is cut above: never wrapped, should a width still differ
        grid.add_column(no_wrap=True, overflow="ellipsis")
    grid.add_row(*cells)
    return grid


def waiting_for_servers(count: int) -> str:
    return f"waiting for {count} MCP server{'' if count == 1 else 's'}"


def servers_named(names: Sequence[str], room: int | None = None) -> str:
    """`names` as `a, b and 3 more`, in `room` cells at most (by default `MOST_NAMED` names);
    `""` if not even the first fits with the count of the rest. A lone name too long is cut."""
    if len(names) == 1 and room is not None:
        cut = Text(names[0])
        cut.truncate(max(room, 0), overflow="ellipsis")
        return cut.plain
    shown: list[str] = []
    used = 0
    for at, name in enumerate(names):
        rest = len(names) - at - 1
        cells = cell_len(name) + (2 if shown else 0)
        more = cell_len(f" and {rest} more") if rest else 0
        fits = at < MOST_NAMED if room is None else used + cells + more <= room
        if not fits:
            break
        shown.append(name)
        used += cells
    if not shown:
        return ""
    left = len(names) - len(shown)
    return ", ".join(shown) + (f" and {left} more" if left else "")
