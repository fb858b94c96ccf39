"""Trace events: what happened in a run, as it happens.

Every run emits `start` and `end` (or `error`) events for the run, its agent (once, however
many steps it takes), each model call and each tool call, plus `progress` events from tools.
Every tool call the model made is a `tool` span, also those the agent answered itself (an
unknown tool, bad arguments, a repeated call): their `error` (or `output`) is what the model
was told. When the run streams, each text delta of a model call is a `token` event under it.
Events carry their parent's id, so nested work prints as a tree. Hooks are async callables;
a failing hook is logged and never fails the run.

What a hook may act on is typed, besides the JSON `output` every event carries for printing:
a tool's progress (`progress`), a log message its MCP server sent during the call
(`server_log`, a `note`), the result of one of a run's many items as it finishes
(`finished_item`, an agent's `note`), and a span ended by a pause rather than a failure
(`paused`, an `error` event whose `error` says the same).
"""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO, runtime_checkable

import anyio
from mcp_types import LoggingMessageNotificationParams
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent import ItemResult, ModelError
from agent.errors import without_provider_words
from toolkits.printable import encodes_all, printable

from .errors import RunPaused
from .trace_waits import Waits

__all__ = [
    "TRACE_CONTEXT_KEYS",
    "JoinsMidway",
    "JsonLinesPrinter",
    "OpenSpan",
    "OpensRoots",
    "PropagatesTrace",
    "Span",
    "ToolProgress",
    "TraceEvent",
    "TraceHook",
    "TracePrinter",
    "Tracer",
    "new_id",
    "trace_context_in",
]

log = logging.getLogger(__name__)

Kind = Literal["run", "agent", "model", "tool"]
Phase = Literal["start", "end", "error", "progress", "note", "token"]


class ToolProgress(BaseModel):
    """One progress report of a tool call (as MCP reports it)."""

    model_config = ConfigDict(frozen=True)

    progress: float
    total: float | None = None
    message: str | None = None


class TraceEvent(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Kind
    phase: Phase
    name: str
    id: str
    parent_id: str | None
    run_id: str
    at_ms: float
    """Milliseconds since the run started."""
    duration_ms: float | None = None
    waited_ms: float | None = None
    """For a span's end: how much of `duration_ms` a call under it waited for a person's
    approval or a slot of its node (`trace_waits`); None: none did."""
    busy_ms: float | None = None
    """For a span's end that waited: the rest of `duration_ms`."""
    input: JsonValue = None
    output: JsonValue = None
    error: str | None = None
    call_id: str | None = None
    """For a tool span: the id of the model's tool call it answers."""
    node: str | None = None
    """For a tool span: the node that ran it (an MCP server's name for its tools)."""
    subject: str | None = None
    """Who started the run or the proxied call (the authenticated MCP client, when served over
    HTTP with auth)."""
    # Typed for hooks; printed and serialised as `output` / `error` (not twice).
    progress: ToolProgress | None = Field(default=None, exclude=True)
    """For a tool's `progress` event: the report."""
    server_log: LoggingMessageNotificationParams | None = Field(default=None, exclude=True)
    """For a tool's `note` of its MCP server's log message: the message as the server sent it."""
    finished_item: ItemResult | None = Field(default=None, exclude=True)
    """For an agent's `note` that one of a run's many items finished: its result (the note's
    `output` says only which item, and whether it failed)."""
    paused: str | None = Field(default=None, exclude=True)
    """For an `error` event that is a pause, not a failure: what the run waits for."""
    error_private: bool = Field(default=False, exclude=True)
    """For a tool span's `error`: the tool's own words, or the call's arguments quoted, which
    may hold personal data (shown to the model and in the trace, kept from telemetry)."""
    error_public: str | None = Field(default=None, exclude=True)
    """For an `error_private` error: what of it is the gateway's own words (a model's name and
    the HTTP status, without the provider's explanation), which telemetry may show."""
    error_type: str | None = Field(default=None, exclude=True)
    """For an `error` event that an exception ended, or a `note` of one (a fallback's): its
    class's name (`ModelConnectionError`), for telemetry's `error.type`."""
    caller_trace: dict[str, str] | None = Field(default=None, exclude=True)
    """For a span with no parent here: the W3C trace context its MCP client sent in the
    request's `_meta` (`traceparent`, `tracestate`; SEP-414), for the span to continue."""


TraceHook = Callable[[TraceEvent], Awaitable[None]]


@runtime_checkable
class PropagatesTrace(Protocol):
    """A hook whose spans continue in the MCP servers a tool call reaches (`OtelExporter`)."""

    def calling_from(self, span_id: str) -> AbstractContextManager[dict[str, str]]:
        """For the time of a request made inside the open span `span_id`: that span as the
        current one (an instrumented client's own span nests under it); yields the W3C trace
        context (`traceparent`, ...) for the request's `_meta`, empty if there is none."""
        ...


@runtime_checkable
class OpensRoots(Protocol):
    """A hook that may open a span as the root of a trace (`OtelExporter`: a run's top span
    when no caller's trace reaches it)."""

    def root_context(self, span_id: str) -> dict[str, str] | None:
        """The W3C trace context (`traceparent`, ...) of the open span `span_id` if it opened
        it with no parent (its sampled flag as its sampler decided), else None."""
        ...


@dataclass(frozen=True, slots=True)
class OpenSpan:
    """A span that started and has not ended: its `start` event, and when that came
    (`time.monotonic()`)."""

    start: TraceEvent
    since: float


@runtime_checkable
class JoinsMidway(Protocol):
    """A hook that may begin to hear a run under way (the follower of a stored run: a
    round's retry, `approve_run`), whose events are under spans it never saw start."""

    def joined(self, open_spans: Sequence[OpenSpan]) -> None:
        """Before the first event it hears: the spans open then, each after its parent."""
        ...


TRACE_CONTEXT_KEYS = ("traceparent", "tracestate", "baggage")
"""The `_meta` keys of a W3C trace context (SEP-414), the exception to prefixed keys."""


def trace_context_in(meta: Mapping[str, Any] | None) -> dict[str, str] | None:
    """The W3C trace context in a request's `_meta`, if it has one."""
    if not meta or not isinstance(meta.get("traceparent"), str):
        return None
    return {key: meta[key] for key in TRACE_CONTEXT_KEYS if isinstance(meta.get(key), str)}


def new_id() -> str:
    return uuid.uuid4().hex[:12]


@dataclass(slots=True)
class Span:
    """An open span; set `output` before it closes, or `fail()` it."""

    id: str
    kind: Kind
    name: str
    started: float
    output: JsonValue = None
    error: str | None = None
    error_private: bool = False

    def fail(self, error: str, *, private: bool = False) -> None:
        """Close as failed without raising: a tool error is an outcome, not an exception.
        `private`: the text is the tool's own or quotes the call (`TraceEvent.error_private`)."""
        self.error = error
        self.error_private = private


@dataclass
class Tracer:
    """Emits a run's events to its hooks, timed from the tracer's creation."""

    run_id: str
    hooks: Sequence[TraceHook] = ()
    subject: str | None = None
    caller_trace: dict[str, str] | None = None
    """The trace context the caller sent (`TraceEvent.caller_trace`), on parentless spans."""
    pausing: Callable[[], str | None] | None = None
    """Asked as a cancel ends a span: what the run was stopped to wait for, if the cancel is
    that pause (`--no-wait`: a person's approval), not a failure."""
    _t0: float = field(default_factory=time.perf_counter)
    _waits: Waits = field(default_factory=Waits)

    def _ms(self, at: float | None = None) -> float:
        return round(((at or time.perf_counter()) - self._t0) * 1000, 1)

    @contextmanager
    def calling_from(self, span_id: str) -> Generator[dict[str, str]]:
        """For a request made inside span `span_id`: the trace context for its `_meta`, the
        span current meanwhile (`PropagatesTrace`)."""
        with ExitStack() as stack:
            carrier: dict[str, str] = {}
            for hook in self.hooks:
                if isinstance(hook, PropagatesTrace):
                    carrier.update(stack.enter_context(hook.calling_from(span_id)))
            yield carrier

    def root_context(self, span_id: str) -> dict[str, str] | None:
        """The trace context of the open span `span_id` if a hook made it a trace's root
        (`OpensRoots`): a stored run keeps it, for the processes that resume it to continue."""
        for hook in self.hooks:
            if not isinstance(hook, OpensRoots):
                continue
            try:
                context = hook.root_context(span_id)
            except Exception:
                log.exception("trace hook %r failed", hook)
                continue
            if context:
                return context
        return None

    async def emit(self, event: TraceEvent) -> None:
        for hook in self.hooks:
            try:
                await hook(event)
            except Exception:
                log.exception("trace hook %r failed", hook)

    async def note(
        self,
        kind: Kind,
        name: str,
        parent_id: str | None,
        phase: Phase = "note",
        *,
        error_type: str | None = None,
        **data: JsonValue,
    ) -> None:
        """A point event (a fallback, a node's health, a streamed token) under `parent_id`;
        `error_type`: the class of the error it tells of (a fallback's), for telemetry."""
        if self.hooks and phase == "note":
            self._waits.noted(name, parent_id, data)
        await self._point(kind, name, parent_id, phase, data, error_type=error_type)

    async def item_finished(
        self, agent: str, parent_id: str, index: int, result: ItemResult
    ) -> None:
        """One of the run's many items finished (answered or failed), under its agent's span:
        `run --items` prints its line then, not at the run's end."""
        output: JsonValue = {"item": index, "failed": result.error is not None}
        await self._point("agent", agent, parent_id, "note", output, finished_item=result)

    async def progress(self, tool: str, parent_id: str, report: ToolProgress) -> None:
        """A tool's progress report, under its span."""
        output: JsonValue = report.model_dump(mode="json")
        await self._point("tool", tool, parent_id, "progress", output, progress=report)

    async def server_log(
        self, tool: str, parent_id: str, params: LoggingMessageNotificationParams
    ) -> None:
        """A log message the tool's MCP server sent during the call, under its span."""
        output: JsonValue = {"log": params.level, "logger": params.logger, "data": params.data}
        await self._point("tool", tool, parent_id, "note", output, server_log=params)

    async def _point(
        self,
        kind: Kind,
        name: str,
        parent_id: str | None,
        phase: Phase,
        output: JsonValue,
        *,
        progress: ToolProgress | None = None,
        server_log: LoggingMessageNotificationParams | None = None,
        finished_item: ItemResult | None = None,
        error_type: str | None = None,
    ) -> None:
        if not self.hooks:
            return
        await self.emit(
            TraceEvent(
                kind=kind,
                phase=phase,
                name=name,
                id=new_id(),
                parent_id=parent_id,
                run_id=self.run_id,
                at_ms=self._ms(),
                output=output,
                subject=self.subject,
                progress=progress,
                server_log=server_log,
                finished_item=finished_item,
                error_type=error_type,
            )
        )

    @asynccontextmanager
    async def span(
        self,
        kind: Kind,
        name: str,
        *,
        parent_id: str | None,
        input: JsonValue = None,
        span_id: str | None = None,
        call_id: str | None = None,
        node: str | None = None,
    ) -> AsyncGenerator[Span]:
        span = Span(id=span_id or new_id(), kind=kind, name=name, started=time.perf_counter())

        def event(
            phase: Phase,
            error: str | None = None,
            paused: str | None = None,
            error_type: str | None = None,
            public: str | None = None,
        ) -> TraceEvent:
            done = phase != "start"
            duration = self._elapsed(span) if done else None
            waited = self._waits.closed(span.id) if done else None
            if waited is not None:
                waited = min(round(waited * 1000, 1), duration or 0.0)
            return TraceEvent(
                kind=kind,
                phase=phase,
                name=name,
                id=span.id,
                parent_id=parent_id,
                run_id=self.run_id,
                at_ms=self._ms(),
                duration_ms=duration,
                waited_ms=waited,
                busy_ms=None if waited is None or duration is None else round(duration - waited, 1),
                input=input,
                output=span.output if done else None,
                error=error,
                call_id=call_id,
                node=node,
                subject=self.subject,
                paused=paused,
                error_private=span.error_private,
                error_public=public,
                error_type=error_type,
                caller_trace=self.caller_trace if parent_id is None else None,
            )

        if not self.hooks:  # nobody listens: skip building events on the hot path
            yield span
            return
        self._waits.opened(span.id, parent_id)
        await self.emit(event("start"))
        try:
            yield span
        except BaseException as exc:
            cancelled = isinstance(exc, anyio.get_cancelled_exc_class())
            error = "cancelled" if cancelled else str(exc) or repr(exc)
            paused = exc.reason if isinstance(exc, RunPaused) else None
            if cancelled and self.pausing is not None:
                paused = self.pausing()
            public = None
            if isinstance(exc, ModelError):
                # A provider's explanation may quote the request: kept from telemetry.
                public = without_provider_words(exc)
                span.error_private = public != error
            with anyio.CancelScope(shield=True):  # the record of a cancel must still go out
                await self.emit(event("error", error, paused, type(exc).__name__, public))
            raise
        await self.emit(event("end" if span.error is None else "error", span.error))

    @staticmethod
    def _elapsed(span: Span) -> float:
        return round((time.perf_counter() - span.started) * 1000, 1)


def compact(value: JsonValue) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


class TracePrinter:
    """Human-readable lines, one per finished span, indented by nesting:

    `[  129 ms] calculator in={"expression":"17 * 25"} out={"response":"425"}`

    A server's log messages at `debug` are left out (the JSON trace has them): a gateway
    behind this one, asked for every level, sends its milestones so.
    """

    def __init__(self, stream: TextIO | None = None, *, max_chars: int = 300) -> None:
        self._stream = stream
        self._max = max_chars
        self._depth: dict[str, int] = {}

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "token":  # the model span's end shows the whole text
            return
        if event.server_log is not None and event.server_log.level == "debug":
            return  # a server's debug chatter: in the JSON trace, not in the lines
        depth = self._depth.get(event.parent_id or "", -1) + 1
        if event.phase == "start":
            self._depth[event.id] = depth
            return
        if event.phase in ("end", "error"):
            # Its children ended before it: the entry is needed no more (`serve --trace`
            # prints for the server's whole life).
            self._depth.pop(event.id, None)
        label = (
            f"{event.kind} {event.name}" if event.kind in ("run", "agent", "model") else event.name
        )
        if event.node is not None and event.node != event.name:
            label += f" via {event.node}"  # the hop: the node (e.g. an MCP server) that ran it
        parts = [f"[{event.at_ms:>6.0f} ms]", "  " * depth + f"{label:<12}"]
        if event.input is not None and event.kind == "tool" and event.phase != "progress":
            parts.append(f"in={self._cut(compact(event.input))}")
        if event.waited_ms is not None:
            parts.append(f"waited={event.waited_ms:.0f} ms")
        if event.error is not None:
            parts.append(f"error={self._cut(event.error)}")
        elif event.output is not None:
            parts.append(f"out={self._cut(compact(event.output))}")
        # Names, inputs, errors and outputs are servers' and models' words: shown, never obeyed.
        print(printable(" ".join(parts)), file=self._stream or sys.stderr, flush=True)

    def _cut(self, text: str) -> str:
        return text if len(text) <= self._max else text[: self._max] + "..."


class JsonLinesPrinter:
    """Every event as one JSON line (streamed tokens only when `tokens`)."""

    def __init__(self, stream: TextIO | None = None, *, tokens: bool = False) -> None:
        self._stream = stream
        self._tokens = tokens

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "token" and not self._tokens:
            return
        stream = self._stream or sys.stdout
        # Valid JSON in any encoding: as `\\u` escapes where the stream's cannot write a
        # character (it would be escaped as `\\xe9`, which JSON does not read).
        print(event.model_dump_json(ensure_ascii=not encodes_all(stream)), file=stream, flush=True)
