"""What a terminal shows of a run while it runs: the answer as the model writes it, and a live
status line of what is in flight.

`RunConsole` is a trace hook. Given a terminal for the answer (`out`), it writes the text deltas
(`token` events) that are the answer's there as they arrive: the run's own agent's, and those
of an agent it handed the conversation to; an agent tool's text stays out of the answer. Given a terminal for the status (`err`), it keeps one line per model or tool call
in flight below everything else, with how long it has run and, for a tool that reports progress,
a bar. The status is transient: it is cleared before any other text is written and drawn again
after, so the answer and trace lines never mix with it. Before the run, while the gateway waits
for MCP servers to start (`waiting_for`), the status names those still starting, on one line. A
call waiting for a person's approval has a line too, with how long it has waited; once the
command chose not to wait (`leaving`, `--no-wait`), the status says it returns when the calls
still in flight end; one asked about on the terminal (`asking`: `chat`) has the terminal to
itself while asked: the status is erased, and what the run does meanwhile is shown once the
person has answered. A terminal that cannot redraw (`plain`: TERM=dumb) gets no status, only one
line saying which servers the command waits for, if it waits. Without terminals it shows
nothing, and piped output is exactly what it would be without it.

While an answer streams, its line is open on the terminal and the status is not drawn. When
the model has sent no text for `QUIET_SECONDS`, a line below the answer's says so (`model X
no text for 6 s`), drawn with relative cursor moves from where the answer's text stops, and
erased before the next text: the answer's text stays whole.

Stopped by Ctrl-Z, the status is erased and the cursor shown until the process goes on.
Interrupted (Ctrl-C), the status says the command is stopping; `say_stopped` writes why it
stopped, and `stopped_note` is the line to end with when nothing else said it (what was
interrupted, how long stopping took).

Whole lines for the terminals (trace printers', and log records of handlers that write to
them, while `open_console` is open) never split a streamed answer's line: they wait until
it ends. A model that fails mid-answer and hands the call to the next one of a fallback list
has its partial text ended there, with a note saying so; only the answering model's text
counts as what was streamed (`streamed`). An agent that handed the conversation to another
gets a dim line saying so, after that agent's answer streamed; a handoff that failed after its
text streamed gets one saying that was not the answer, before the handing agent's own.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import AsyncGenerator, Generator, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    asynccontextmanager,
    contextmanager,
    nullcontext,
)
from typing import IO, TextIO, cast

import anyio
import anyio.abc
from rich.console import Console
from rich.live import Live
from rich.text import Text

from toolkits import in_background
from toolkits.printable import printable

from .console_lines import WholeLines, logs_through
from .console_quiet import QuietLine, cursor_column
from .console_status import Call, Status, Waiting, servers_named, waiting_for_servers
from .item_results import handed_off_to
from .trace import TraceEvent

__all__ = ["RunConsole", "open_console", "open_terminal_console"]

REFRESH_SECONDS = 0.125
"""How often the status line is redrawn (its clocks and spinners move)."""
QUIET_SECONDS = 3.0
"""How long a streaming answer may go without text before a line below it says so."""
_ANSWER_DEPTH = 2
"""The run's own model calls (run → agent → model): only their text is the answer; a
sub-agent's model calls sit deeper, under the tool call that runs it."""
_NOTE_CHARS = 160
"""The most of a failed model's error a fallback note shows (the trace has it whole)."""


class RunConsole:
    """A trace hook that streams a run's answer to `out` and its status to `err`; either may
    be None (not a terminal)."""

    def __init__(
        self,
        *,
        out: Console | None = None,
        err: Console | None = None,
        plain: IO[str] | None = None,
        quiet_after: float = QUIET_SECONDS,
        asks: bool = False,
    ) -> None:
        """`plain` is a terminal that cannot redraw a line (TERM=dumb), in place of `err`: it
        is told once, in a line of its own, which servers the command waits for. `asks`: a
        person may be asked on stderr (`asking`), whose lines then come through it too."""
        self._out = out
        self._err = err
        self._plain = plain
        self._asks = asks
        self._quiet = QuietLine(quiet_after)
        self._calls: dict[str, Call] = {}
        self._runs: set[str] = set()
        """The runs under way (their top spans): none at `chat`'s prompt."""
        self._depth: dict[str, int] = {}
        self._texts: dict[str, str] = {}
        self._last_text: str | None = None
        self._wrote = 0
        """How many deltas of the answer were written to `out`."""
        self._tools: dict[str, int] = {}
        """Each tool call in flight (a handoff, maybe): how many deltas were written by then."""
        self._midline = False
        self._held: list[tuple[IO[str], str]] = []
        """Whole lines that came while a streamed answer's line was open: written when it ends."""
        self._live: Live | None = None
        self._waiting = Waiting()
        self._asking = False
        self._paused: list[TraceEvent] = []
        """What the run did while a person was asked (`asking`): shown after."""
        self.approval_hint = "waiting for a decision (runs approve | deny)"
        """What the status line of a call waiting for approval says of how it is decided."""
        # Log records arrive on any thread (a plain local tool runs in one): one writer at a
        # time, and the state it reads is whole.
        self._lock = threading.RLock()

    # -- the trace hook ------------------------------------------------------------------

    async def __call__(self, event: TraceEvent) -> None:
        with self._lock:
            if self._asking:
                self._paused.append(event)  # shown once the person has answered
            else:
                self._take(event)

    def _take(self, event: TraceEvent) -> None:
        depth = self._depth.get(event.parent_id or "", -1) + 1
        if event.phase == "start":
            self._depth[event.id] = depth
            if event.kind == "run" and event.parent_id is None:
                self._runs.add(event.id)
            if event.kind in ("model", "tool"):
                self._calls[event.id] = Call(event.kind, printable(event.name), depth)
            if event.kind == "tool":
                self._tools[event.id] = self._wrote
        elif event.phase == "token":
            self._token(event)
        elif event.phase == "note" and event.kind == "model":
            self._fallback(event)
        elif event.phase == "note" and event.kind == "tool":
            self._approval(event, depth)
        elif event.phase == "note" and event.kind == "agent":
            self._handoff(event)
        elif event.phase == "progress":
            self._progress(event)
        elif event.phase in ("end", "error"):
            self._calls.pop(event.id, None)
            self._tools.pop(event.id, None)
            if event.kind == "run" and event.parent_id is None:  # no call waits on now
                self._runs.discard(event.id)
                for key in [key for key in self._calls if key.startswith("approval ")]:
                    del self._calls[key]
            if event.kind == "model" and event.id in self._texts:
                self._finish_text(event.id)
            self._depth.pop(event.id, None)  # a chat or served run's console lives long
        self._show()

    def waiting_for(self, servers: Sequence[str]) -> None:
        """Show that the gateway waits for these MCP servers to start (none: it stopped)."""
        with self._lock:
            if self._waiting.stopping is not None:
                return
            if servers and not self._waiting.names:
                self._waiting.started = time.monotonic()
            self._waiting.names = list(servers)
            if servers and self._plain is not None:
                self._plain, plain = None, self._plain  # once: seconds of silence, then one line
                self.write_line(
                    plain, f"{waiting_for_servers(len(servers))}: {servers_named(servers)}\n"
                )
            self._show()

    def streamed(self, output: str | None) -> bool:
        """Whether `output` is the text the run's last model call already wrote to `out`."""
        return output is not None and self._last_text is not None and output == self._last_text

    def stream(self, target: TextIO) -> TextIO:
        """A text stream onto `target` whose lines are written around the status line (for
        trace printers); `target` itself when there is no status or question to keep clear
        of."""
        if self._err is None and self._out is None and not self._asks:
            return target
        return cast(TextIO, WholeLines(self, target))

    def close(self) -> None:
        """End an unfinished streamed line (the lines held for its end follow) and clear the
        status."""
        with self._lock:
            self._hide()
            self._end_line()

    def stopping(self) -> None:
        """The command was interrupted (Ctrl-C): show that it is stopping (its MCP servers take
        a moment) instead of what was in flight, which will not end. Interrupted while it
        waited for MCP servers to start, it says so at once: nothing ran."""
        with self._lock:
            if self._waiting.stopping is not None:
                return
            starting = self._waiting.names
            self._waiting.names = []
            self._waiting.stopping = time.monotonic()
            self._waiting.idle = not (self._runs or self._calls or starting)
            self._calls.clear()
            self._hide()
            self._end_line()
            if starting:
                self._waiting.interrupted_start = starting
                self._say(
                    "interrupted while waiting for MCP servers to start "
                    f"({servers_named(starting)}): stopping them"
                )
            self._show()

    def leaving(self) -> None:
        """The command waits for no decision now (`--no-wait`): the calls waiting for one are
        not shown, and the status says it returns once the calls in flight end."""
        with self._lock:
            self._waiting.leaving = True
            for key in [key for key in self._calls if key.startswith("approval ")]:
                del self._calls[key]
            self._show()

    def say(self, text: str) -> None:
        """A message on stderr, clear of the status line and of a streamed answer's open line
        (written once that line ends)."""
        with self._lock:
            self._say(text)

    def note(self, text: str) -> None:
        """`say` `text` dim (plain on a terminal that draws no status)."""
        with self._lock:
            if self._err is None:
                return self._say(text)
            with self._err.capture() as captured:
                self._err.print(Text(printable(text), style="dim"), highlight=False, soft_wrap=True)
            if self._midline or self._asking:
                return self._held.append((self._err.file, captured.get()))
            self._hide()
            self._write(self._err.file, captured.get())
            self._show()

    def busy(self, key: str, doing: str | None) -> None:
        """A status line of what the command is `doing` for the run, until told None."""
        with self._lock:
            if doing is None:
                self._calls.pop(key, None)
            else:
                self._calls.setdefault(key, Call("memory", doing, _ANSWER_DEPTH, hidden_for=0.5))
            self._show()

    def say_stopped(self, text: str) -> None:
        """`say` why the command stopped (interrupted, say): `stopped_note` adds nothing."""
        with self._lock:
            self._waiting.stop_said = True
            self._say(text)

    def stopped_note(self) -> str | None:
        """After an interruption (`stopping`), the line to end with when the command said
        nothing of it: what was interrupted, and how long stopping took."""
        waiting = self._waiting
        if waiting.stopping is None or waiting.stop_said or waiting.idle:
            return None  # (idle: nothing was under way, `chat` at its prompt, say)
        took = f"{time.monotonic() - waiting.stopping:.1f} s"
        if waiting.interrupted_start:
            return f"stopped after {took}: nothing ran"
        return f"interrupted: stopped after {took}"

    def _say(self, text: str) -> None:
        stderr = self._err.file if self._err is not None else sys.stderr
        self.write_line(stderr, text.rstrip("\n") + "\n")

    def suspend(self) -> None:
        """Ctrl-Z: stop the process as the terminal asked (SIGTSTP, caught), its status
        erased and the cursor shown while it is stopped (a live status hides it, and a shell
        would keep it hidden); drawn again once the process goes on (`fg`)."""
        with self._lock:
            self._hide()
            os.kill(os.getpid(), signal.SIGSTOP)  # what SIGTSTP's default action does
            self._show()

    def cancelled(self) -> None:
        """The run was cancelled (`chat`'s Ctrl-C): the calls in flight will not end, so stop
        showing them, and end the streamed line."""
        with self._lock:
            self._calls.clear()
            self._texts.clear()
            self.close()

    @contextmanager
    def asking(self) -> Generator[IO[str]]:
        """While a person is asked a question on the terminal (the one it yields): the status
        erased, a streamed answer's open line ended, and everything else (the run's events,
        lines) held until the block ends, so nothing is written into the question or the
        answer being typed."""
        with self._lock:
            self._hide()
            self._end_line()
            self._asking = True
        try:
            yield self._err.file if self._err is not None else sys.stderr
        finally:
            with self._lock:
                self._asking = False
                self._release()
                paused, self._paused = self._paused, []
                for event in paused:
                    self._take(event)
                self._show()

    # -- the answer ----------------------------------------------------------------------

    def _token(self, event: TraceEvent) -> None:
        said = event.output if isinstance(event.output, dict) else {}
        text = said.get("text")
        if not isinstance(text, str) or event.parent_id is None:
            return
        call = self._calls.get(event.parent_id)
        if call is not None:
            call.chars += len(text)
        if self._out is None or not said.get("answer"):
            return
        self._hide()
        self._wrote += 1
        self._texts[event.parent_id] = self._texts.get(event.parent_id, "") + text
        # On a terminal (a pipe gets nothing here), a model repeating an escape sequence a
        # tool result planted must not drive it: shown as text, as every other line is.
        shown = printable(text)
        self._write(self._out.file, shown)
        self._quiet.wrote(event.parent_id, shown)
        self._midline = not text.endswith("\n")
        if not self._midline:
            self._release()

    def _fallback(self, event: TraceEvent) -> None:
        """A model of a fallback list failed and the next one takes the call (a note under the
        call's span): what the failed one streamed is not the answer. Its line is ended, and
        a dim note says what happened before the next model's text begins."""
        said = event.output if isinstance(event.output, dict) else {}
        following, error = said.get("fallback_to"), said.get("error")
        span_id = event.parent_id or ""
        answering = span_id in self._texts or self._depth.get(span_id) == _ANSWER_DEPTH
        if not isinstance(following, str) or not answering:
            return
        call = self._calls.get(span_id)
        if call is not None:
            call.chars = 0  # counts the next model's text
        partial = self._texts.pop(span_id, None)
        self._hide()
        self._end_line()
        if self._err is not None:
            terminal = self._err
        elif partial is not None and self._out is not None and self._out.is_terminal:
            terminal = self._out  # the note follows the cut-off text it explains
        else:
            return  # no terminal for notes (a piped `chat`), or nothing to explain on `out`
        reason = " ".join(str(error).split()) if error is not None else "no reason given"
        reason = reason.removeprefix(f"{event.name}: ")  # named once is enough
        if len(reason) > _NOTE_CHARS:
            reason = reason[: _NOTE_CHARS - 1] + "…"
        when = " mid-answer" if partial else ""
        note = f"{event.name} failed{when} ({reason}); {following} answers instead"
        terminal.print(Text(printable(note), style="dim"), highlight=False, soft_wrap=True)

    def _handoff(self, event: TraceEvent) -> None:
        """An agent's item was answered by the agent it handed it to (a note as the item
        ends): a dim line says so on the status's terminal, before the answer is shown."""
        said = event.output if isinstance(event.output, dict) else {}
        to = handed_off_to(said)
        failed = said.get("handoff_failed")
        if isinstance(failed, str):
            self._handoff_failed(event, failed, said.get("error"))
        if to is None or self._err is None:
            return
        self._hide()
        self._end_line()
        line = Text(printable(f"{event.name} handed off to {to}"), style="dim")
        self._err.print(line, highlight=False, soft_wrap=True)

    def _handoff_failed(self, event: TraceEvent, to: str, error: object) -> None:
        """A handoff failed after its agent's text streamed as the answer: that text is not
        the answer. Its line is ended and a dim note says so, before the handing agent's
        own answer."""
        if self._tools.get(event.parent_id or "", self._wrote) == self._wrote:
            return  # nothing of it was shown
        self._last_text = None
        self._hide()
        self._end_line()
        terminal = self._err or (
            self._out if self._out is not None and self._out.is_terminal else None
        )
        if terminal is None:
            return
        reason = " ".join(str(error).split())
        if len(reason) > _NOTE_CHARS:
            reason = reason[: _NOTE_CHARS - 1] + "…"
        note = f"{to} failed ({reason}): that was not the answer; {event.name} answers instead"
        terminal.print(Text(printable(note), style="dim"), highlight=False, soft_wrap=True)

    def _finish_text(self, span_id: str) -> None:
        self._last_text = self._texts.pop(span_id)
        self._end_line()

    def _end_line(self) -> None:
        """End the streamed answer's open line, then write the lines that waited for it."""
        self._unsay_quiet()
        if self._midline and self._out is not None:
            self._write(self._out.file, "\n")
        self._midline = False
        self._quiet.ended()
        self._release()

    def _release(self) -> None:
        held, self._held = self._held, []
        for target, line in held:
            self._write(target, line)

    # -- the status line -----------------------------------------------------------------

    def _approval(self, event: TraceEvent, depth: int) -> None:
        """A call waits for a person's approval (a note the gate writes), or for a slot of its
        node: a status line with how long it has waited, until it is decided (or taken)."""
        said = event.output if isinstance(event.output, dict) else {}
        approval, call, slot = said.get("approval"), said.get("call"), said.get("slot")
        if isinstance(slot, str):  # waiting for a slot of its node (`node_slots`)
            key = f"slot {call} {event.name}"
            waits = said.get("waits")
            if slot == "waiting" and isinstance(waits, str):
                waiting = Call("tool", printable(event.name), depth)
                waiting.message = printable(f"waiting for {waits}")
                self._calls[key] = waiting
            else:
                self._calls.pop(key, None)
            return
        if not isinstance(approval, str):
            return
        key = f"approval {call}"
        if approval == "waiting" and not self._waiting.leaving:
            waiting = Call("approval", printable(event.name), depth)
            waiting.message = self.approval_hint
            self._calls[key] = waiting
        else:
            self._calls.pop(key, None)

    def _show_quiet(self) -> None:
        """The answer's line is open and its model has been quiet a while: say so on the
        line below (the cursor goes back to where the text stops)."""
        if self._err is None or self._out is None:
            return
        span_id, quiet = self._quiet.span_id, self._quiet.quiet_for()
        call = self._calls.get(span_id or "")
        if call is None or quiet is None:
            return
        width = self._out.width
        column = cursor_column(self._quiet.line, width)
        if column == width:
            return  # the text fills the row: where the cursor stands is the terminal's guess
        text = Text(f"{call.kind} ", style="dim")
        text.append(call.name, style="bold")
        text.append(f"  no text for {quiet:.0f} s", style="yellow")
        text.append(f"  {time.monotonic() - call.started:.1f} s, {call.chars} chars", style="dim")
        text.truncate(width - 1, overflow="ellipsis")
        with self._err.capture() as captured:
            self._err.print(text, end="", highlight=False, soft_wrap=True)
        self._write(self._err.file, self._quiet.drawn(captured.get(), column))

    def _unsay_quiet(self) -> None:
        """Erase the line that said the model was quiet; the cursor stays where it was."""
        if not self._quiet.shown or self._err is None or self._out is None:
            return
        column = cursor_column(self._quiet.line, self._out.width)
        self._write(self._err.file, self._quiet.undrawn(column))

    def _progress(self, event: TraceEvent) -> None:
        call = self._calls.get(event.parent_id or "")
        if call is not None and event.progress is not None:
            call.progressed(event.progress)

    def _show(self) -> None:
        """Draw the status when anything is in flight and no streamed line is open."""
        if self._err is None:
            return
        shown = self._calls or self._waiting.names or self._waiting.stopping is not None
        if not shown or self._midline or self._asking:
            self._stop_live()  # a line saying the model is quiet stays (`_show_quiet`)
            return
        if self._live is None:
            # A fresh Live each time: a stopped one would move the cursor by its old height.
            self._live = Live(
                Status(self._calls, self._waiting),
                console=self._err,
                transient=True,
                auto_refresh=False,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start(refresh=True)
        else:
            self._live.refresh()

    def _hide(self) -> None:
        self._unsay_quiet()
        self._stop_live()

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def refresh(self) -> None:
        """Redraw the status (its clocks and spinners); called by `open_console`'s ticker."""
        with self._lock:
            if self._live is not None:
                self._live.refresh()
            elif self._midline:
                self._show_quiet()

    def _write(self, file: IO[str], text: str) -> None:
        file.write(text)
        file.flush()

    def write_line(self, target: IO[str], line: str) -> None:
        """Write a whole line to `target` with the status cleared around it; while a streamed
        answer's line is open, once that line ends (the answer's text stays whole)."""
        with self._lock:
            if self._midline or self._asking:
                self._held.append((target, printable(line)))
                return
            self._hide()
            self._write(target, printable(line))  # log lines carry servers' and callers' words
            self._show()


@asynccontextmanager
async def open_console(
    out: Console | None,
    err: Console | None,
    *,
    plain: IO[str] | None = None,
    refresh: float = REFRESH_SECONDS,
    asks: bool = False,
) -> AsyncGenerator[RunConsole]:
    """A `RunConsole` whose status is redrawn every `refresh` seconds while it is open, and
    erased, the cursor shown, while Ctrl-Z keeps the process stopped (`suspend`); `asks`:
    a person may be asked on stderr (`RunConsole.asking`)."""
    console = RunConsole(out=out, err=err, plain=plain, asks=asks)

    async def tick() -> None:
        while True:
            await anyio.sleep(refresh)
            console.refresh()

    async def suspending(*, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGTSTP) as received:
            task_status.started()
            async for _ in received:
                console.suspend()

    terminals = {terminal.file for terminal in (out, err) if terminal is not None}
    if asks:
        terminals.add(sys.stderr)
    with logs_through(console, terminals):
        async with (
            in_background(tick, wait_started=False) if err is not None else nullcontext() as tasks
        ):
            # Ctrl-Z (SIGTSTP) is caught on a POSIX system, in the main thread (a signal's
            # handler is the main thread's to set).
            main = threading.current_thread() is threading.main_thread()
            if tasks is not None and main and hasattr(signal, "SIGTSTP"):
                await tasks.start(suspending)
            try:
                yield console
            finally:
                console.close()


def open_terminal_console(
    stdout: TextIO, stderr: TextIO, *, asks: bool = False
) -> AbstractAsyncContextManager[RunConsole]:
    """A `RunConsole` on whichever of `stdout` and `stderr` is a terminal (none when piped);
    a `stderr` that cannot redraw (TERM=dumb) gets plain lines. `asks`: see `open_console`."""

    def terminal(file: TextIO) -> Console | None:
        console = Console(file=file)
        return console if console.is_terminal and not console.is_dumb_terminal else None

    dumb = Console(file=stderr).is_dumb_terminal  # (a terminal, of TERM dumb or unknown)
    plain = stderr if dumb else None
    return open_console(terminal(stdout), terminal(stderr), plain=plain, asks=asks)
