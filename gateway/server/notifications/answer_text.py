"""A run's own answer as its models write it, from the run's trace: the text deltas (`token`
events) of the model calls of the run's own agent, never of its sub-agents.

The run's agent span is the one whose parent is the run (`parent_id == run_id`); its model
calls are the model spans under it. A sub-agent's spans hang under the tool call that ran it,
so its text never reaches the caller as answer. The text one model call wrote before the
model called tools (a preamble) streams too; a later call's text follows a blank line.

A follower that joins a stored run under way (`JoinsMidway`) missed the start of the model
call open then: that call's text is not streamed, and `rest` gives the answer in full.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from ...trace import OpenSpan, TraceEvent

__all__ = ["AnswerText"]

SEPARATOR = "\n\n"
"""Between the text of two model calls (a preamble, then the answer after tool calls)."""


class AnswerText:
    """A trace hook handing each delta of the run's own answer to `on_text`."""

    def __init__(self, on_text: Callable[[str], Awaitable[None]]) -> None:
        self._on_text = on_text
        self._agents: set[str] = set()
        """The run's own agent span (one; a set, as a run resumed may open it again)."""
        self._calls: dict[str, list[str]] = {}
        """The agent's model calls heard from their start, with the text each wrote."""
        self._last: str | None = None
        """The last model call that wrote text."""
        self.sent = False
        """Whether any text was handed on."""

    def joined(self, open_spans: Sequence[OpenSpan]) -> None:
        """Joining a stored run under way: its agent span is known; the model call open now
        began unheard, so its text is left to `rest`."""
        for span in open_spans:
            start = span.start
            if start.kind == "agent" and start.parent_id == start.run_id:
                self._agents.add(start.id)

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "start":
            if event.kind == "agent" and event.parent_id == event.run_id:
                self._agents.add(event.id)
            elif event.kind == "model" and event.parent_id in self._agents:
                self._calls[event.id] = []
        elif event.phase == "token" and event.parent_id in self._calls:
            output = event.output
            text = output.get("text") if isinstance(output, dict) else None
            if not isinstance(text, str) or not text:
                return
            written = self._calls[event.parent_id]
            if not written and self.sent:
                text = SEPARATOR + text
            written.append(text)
            self._last = event.parent_id
            self.sent = True
            await self._on_text(text)

    def rest(self, answer: str) -> str:
        """What of the run's `answer` the caller has not had yet: the end of the last text
        streamed, when that text began it (the usual case: nothing), else the whole answer
        (after a blank line, if a preamble was sent). An answer no model call wrote as text
        (a structured answer given through a tool) so arrives whole."""
        if self._last is not None:
            written = "".join(self._calls[self._last]).removeprefix(SEPARATOR)
            if answer.startswith(written):
                return answer[len(written) :]
        return SEPARATOR + answer if self.sent else answer
