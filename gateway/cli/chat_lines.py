"""What `chat` shows on a terminal's stderr of a question's run besides its answer: a line for
each call of the agent's tools once it ends (its name, its arguments cut to the width, how it
ended), and one as it starts on a terminal that draws no status (TERM=dumb); the agent's
warnings (the history left out to fit the context window: once a chat); and, while the answer
is whole and its turn is being saved, a status line saying so (`saving`: interrupted then,
the turn may be stored)."""

from __future__ import annotations

import json

from rich.cells import cell_len, set_cell_size

from ..console import RunConsole
from ..trace import TraceEvent

__all__ = ["ChatLines"]

_AGENT_CALLS = 2
"""The depth of the run's own agent's model and tool calls (run → agent → call)."""
_WINDOW_WARNING = "did not fit the model's context window"
"""Said by the warning of every turn once the history outgrows the window: shown once."""
_SAVING = "saving the turn"


class ChatLines:
    """A trace hook writing those lines through `console`, `width` cells wide at most; `starts`:
    also a line as each tool call starts (where no status line shows it running)."""

    def __init__(self, console: RunConsole, *, width: int, starts: bool) -> None:
        self._console = console
        self._width = width
        self._starts = starts
        self._depth: dict[str, int] = {}
        self._window_said = False
        self.saving = False
        """The answer was whole and the run saving its turn when it ended (or still is)."""

    async def __call__(self, event: TraceEvent) -> None:
        depth = self._depth.get(event.parent_id or "", -1) + 1
        if event.phase == "start":
            self._depth[event.id] = depth
            if depth == _AGENT_CALLS or (event.kind == "run" and event.parent_id is None):
                self._saved()  # a new question, or the model asked again (an answer refused)
            if event.kind == "tool" and depth == _AGENT_CALLS and self._starts:
                self._console.note(self._fitted(f"tool {event.name}", event.input, " running…"))
        elif event.phase in ("end", "error"):
            depth = self._depth.pop(event.id, depth)
            if event.kind == "tool" and depth == _AGENT_CALLS:
                self._tool_ended(event)
            elif event.kind == "model" and depth == _AGENT_CALLS and event.phase == "end":
                said = event.output if isinstance(event.output, dict) else {}
                if not said.get("tool_calls"):  # the answer: its turn is saved next
                    self.saving = True
                    self._console.busy(_SAVING, "saving the turn to chat memory")
            elif event.kind == "run" and event.parent_id is None:
                self._console.busy(_SAVING, None)
                # Cancelled mid-save, the turn may be stored (`saving` stays until the next run).
                self.saving = self.saving and event.phase == "error"
        elif event.phase == "note" and event.kind == "agent":
            said = event.output if isinstance(event.output, dict) else {}
            warning = said.get("warning")
            if isinstance(warning, str):
                self._warned(warning)

    def _saved(self) -> None:
        if self.saving:
            self.saving = False
            self._console.busy(_SAVING, None)

    def _tool_ended(self, event: TraceEvent) -> None:
        took = f"{(event.duration_ms or 0) / 1000:.1f} s"
        if event.phase == "end":
            self._console.note(self._fitted(f"tool {event.name}", event.input, f": ok, {took}"))
            return
        error = " ".join((event.error or "no reason given").split())
        line = self._fitted(f"tool {event.name}", event.input, f": failed, {took}") + f": {error}"
        if cell_len(line) > self._width - 1:  # an error may be a page: the trace has it whole
            line = set_cell_size(line, max(self._width - 2, 1)) + "…"
        self._console.note(line)

    def _fitted(self, head: str, arguments: object, tail: str) -> str:
        """`head`, the arguments as JSON cut to what the width leaves (a few cells at least),
        then `tail`."""
        if not arguments:
            return f"{head}{tail}"
        shown = json.dumps(arguments, ensure_ascii=False)
        room = max(self._width - 2 - cell_len(head) - cell_len(tail), 12)
        if cell_len(shown) > room:
            shown = set_cell_size(shown, room - 1) + "…"
        return f"{head} {shown}{tail}"

    def _warned(self, warning: str) -> None:
        if _WINDOW_WARNING in warning:
            if self._window_said:
                return
            self._window_said = True
            warning += " (said once a chat: the next turns leave out their oldest the same way)"
        self._console.note(f"warning: {warning}")
