"""A run's own answer as its models write it, from the run's trace: the text deltas (`token`
events) that say they are the answer's (`answer`): the model calls of the run's own agent and
of an agent it handed the conversation to, never an agent tool's. The text one model call
wrote before the model called tools (a preamble) streams too; a later call's text follows a
blank line.

A handoff that fails after its agent's answer began streaming (cut off, refused, ...) leaves
the caller's model to answer, and a stream cannot take back what it sent: the rest is not
sent, and `retracted` says why (the stream ends with it). Text its agent wrote before calling
tools was a preamble, as the caller's own is: the caller's answer follows it.

A structured answer (an agent with an output schema) is the JSON its schema's check made of
the model's answer (a `final_result` call, or text that is JSON: compact, pretty, fenced),
which no model call wrote as such: a model call of such an agent streams nothing, and when
the run's own agent has one, nothing of the run streams (`whole`): `rest` gives the answer,
so the text streamed is exactly the answer sent whole, JSON a client can parse
(`response_format`).

A follower that joins a stored run under way (`JoinsMidway`) missed the start of the model
call open then: that call's text is not streamed, and `rest` gives the answer in full.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence

from ...trace import OpenSpan, TraceEvent

__all__ = ["AnswerText"]

SEPARATOR = "\n\n"
"""Between the text of two model calls (a preamble, then the answer after tool calls)."""


class AnswerText:
    """A trace hook handing each delta of the run's own answer to `on_text`."""

    def __init__(
        self,
        on_text: Callable[[str], Awaitable[None]],
        *,
        shaped: Collection[str] = (),
        whole: bool = False,
        on_answered: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._on_text = on_text
        self._on_answered = on_answered
        """Told as each model call of the run answers (a stream begins at the first: one
        refused before it, for the context window say, is answered with its status)."""
        self._shaped = shaped
        """The agents with an output schema: their model calls' text is not the answer's."""
        self.whole = whole
        """Whether nothing streams: the run's own agent has an output schema."""
        self._agents: dict[str, str] = {}
        """The agent spans heard, by id: whose model calls are under them."""
        self._calls: dict[str, list[str]] = {}
        """The model calls heard from their start, with the answer's text each wrote."""
        self._order: list[str] = []
        """The calls that wrote answer text, in order."""
        self._called_tools: set[str] = set()
        """The calls that ended asking for tools: what they wrote was a preamble."""
        self._handoffs: dict[str, int] = {}
        """Each tool call in flight (a handoff, maybe): how many calls had written by then."""
        self._last: str | None = None
        """The last model call that wrote text."""
        self.sent = False
        """Whether any text was handed on."""
        self.retracted: str | None = None
        """Why the text sent is not the answer: a handoff whose answer had begun streaming
        failed (the rest is not sent; a stream cannot take back what it sent)."""

    def joined(self, open_spans: Sequence[OpenSpan]) -> None:
        """Joining a stored run under way: the model call open now began unheard, so its text
        is left to `rest` (a call is heard from its start)."""
        del open_spans

    async def __call__(self, event: TraceEvent) -> None:
        output = event.output if isinstance(event.output, dict) else {}
        if event.phase == "start":
            if event.kind == "agent":
                self._agents[event.id] = event.name
            elif event.kind == "model" and not self._withheld(event.parent_id):
                self._calls[event.id] = []
            elif event.kind == "tool":
                self._handoffs[event.id] = len(self._order)
        elif event.phase in ("end", "error"):
            if event.kind == "tool":
                self._handoffs.pop(event.id, None)
            elif event.kind == "model" and "tool_calls" in output:
                self._called_tools.add(event.id)
            if event.kind == "model" and event.phase == "end" and self._on_answered is not None:
                await self._on_answered()
        elif event.phase == "note" and event.kind == "agent" and "handoff_failed" in output:
            self._handoff_failed(event)
        elif event.phase == "token" and event.parent_id in self._calls and output.get("answer"):
            text = output.get("text")
            if not isinstance(text, str) or not text or self.retracted is not None:
                return
            written = self._calls[event.parent_id]
            if not written:
                self._order.append(event.parent_id)
                if self.sent:
                    text = SEPARATOR + text
            written.append(text)
            self._last = event.parent_id
            self.sent = True
            await self._on_text(text)

    def _withheld(self, agent_span: str | None) -> bool:
        """Whether the text of a model call under `agent_span` is held back: its answer is
        structured, given whole by `rest`."""
        return self.whole or self._agents.get(agent_span or "") in self._shaped

    def _handoff_failed(self, event: TraceEvent) -> None:
        """A handoff failed, and its caller's model goes on: text its agent wrote before
        calling tools was a preamble, as the caller's own is; an answer it began is not the
        answer, and can be followed by no other."""
        mark = self._handoffs.get(event.parent_id or "")
        if mark is None:
            return
        answered = [call for call in self._order[mark:] if call not in self._called_tools]
        if answered:
            output = event.output if isinstance(event.output, dict) else {}
            self.retracted = (
                f"agent {event.name!r} handed the conversation to {output.get('handoff_failed')!r}, "
                f"whose answer had begun streaming when it failed ({output.get('error')}): "
                f"{event.name!r} answers instead, which cannot follow in this stream"
            )

    def rest(self, answer: str) -> str:
        """What of the run's `answer` the caller has not had yet: the end of the last text
        streamed, when that text began it (the usual case: nothing), else the whole answer
        (after a blank line, if a preamble was sent). An answer no model call wrote as text
        (a structured answer) so arrives whole."""
        if self._last is not None:
            written = "".join(self._calls[self._last]).removeprefix(SEPARATOR)
            if answer.startswith(written):
                return answer[len(written) :]
        return SEPARATOR + answer if self.sent else answer
