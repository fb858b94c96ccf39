"""The run console's status: one line per model or tool call in flight, with its clock,
spinner and progress, and above them what the command waits for (servers starting, calls
ending after `--no-wait`) or that it is stopping. Drawn by `RunConsole` (`console.py`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

__all__ = ["Call", "Status", "Waiting"]


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
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))


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
            rows.append(Text("--no-wait: returns once these end (Ctrl-C: now)", style="bold"))
        if waiting.names:
            label = Text("waiting for MCP servers to start: ", style="dim")
            label.append(", ".join(waiting.names), style="bold")
            label.append(f"  {now - waiting.started:.1f} s", style="dim")
            grid = Table.grid(padding=(0, 1))
            grid.add_row(waiting.spinner, label)
            rows.append(grid)
        for call in list(self._calls.values()):
            grid = Table.grid(padding=(0, 1))
            label = Text("  " * max(call.depth - 2, 0))
            label.append(f"{call.kind} ", style="dim")
            label.append(call.name, style="bold")
            label.append(f"  {now - call.started:.1f} s", style="dim")
            if call.chars:
                label.append(f"  {call.chars} chars", style="dim")
            cells: list[RenderableType] = [call.spinner, label]
            if call.total:
                cells.append(ProgressBar(total=call.total, completed=call.done or 0, width=20))
                cells.append(Text(f"{call.done or 0:g}/{call.total:g}"))
            elif call.done is not None:
                cells.append(Text(f"{call.done:g}"))
            if call.message:
                cells.append(Text(call.message, style="italic"))
            grid.add_row(*cells)
            rows.append(grid)
        yield Group(*rows)
