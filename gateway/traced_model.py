"""A ChatModel wrapper that reports each model call to the run's trace and budget."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from contextvars import ContextVar
from dataclasses import dataclass
from typing import cast

import anyio
from pydantic import JsonValue

from agent import (
    AllModelsFailed,
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ModelError,
    ReportsContextWindow,
    ReportsServer,
    ServerAddress,
    TokenCallback,
    ToolDefinition,
)
from agent.context_window import check_context_window
from agent.errors import without_provider_words
from agent.model import holds_output_schema
from agent.models import FallbackModel, request_headers, thinking_text

from .journal import RecordedModel
from .run_context import HOPS_HEADER, TokenBudget
from .trace import Tracer

__all__ = ["TracedModel", "note_fallback", "note_retry"]

_TRACE_HEADERS = ("traceparent", "tracestate")


@dataclass(slots=True)
class _ModelCall:
    """The model call in progress in this task: lets a FallbackModel built once at start-up
    report into whichever run is calling it."""

    tracer: Tracer
    span_id: str
    model: ChatModel
    """What the `TracedModel` wraps (a fallback list, maybe recorded)."""
    sending: ExitStack
    """The call's request headers and trace context, entered anew when another model of a
    fallback list is asked (its span is another)."""
    headers: dict[str, str]
    task: int
    """The task it runs in: only there may its headers be entered anew (a context's values
    are reset in the context that set them)."""


_current_call: ContextVar[_ModelCall | None] = ContextVar("model_call", default=None)


async def note_fallback(failed: str, error: ModelError, next_model: str) -> None:
    """`FallbackModel`'s callback: a note under the current model call's span, saying the
    failed model's error (its class too) and the server it went to; the next model's
    requests then carry the trace context the span has now (telemetry makes each model
    asked a span of its own)."""
    call = _current_call.get()
    if call is None:
        return
    # Without the provider's words: they may quote the request, and notes are telemetry.
    said = without_provider_words(error) or type(error).__name__
    server = _server_fields(_server_named(call.model, failed))
    await call.tracer.note(
        "model",
        failed,
        call.span_id,
        "note",
        error_type=type(error).__name__,
        fallback_to=next_model,
        error=said,
        **server,
    )
    if call.tracer.hooks and anyio.get_current_task().id == call.task:
        _send_from_span(call)  # over the first model's: closed first, as the call ends


async def note_retry(model: str, said: str) -> None:
    """`RetryPolicy`'s callback: a retry (why, how long, which attempt) is a note under the
    current model call's span, as it is a warning in the log."""
    call = _current_call.get()
    if call is not None:
        await call.tracer.note("model", model, call.span_id, "note", retry=said)


class TracedModel:
    """Each call is a `model` span; with `stream`, the model is asked to stream and each text
    delta is a `token` event under the span. A call that would not fit the context window
    (`context_window`, else what the model's provider reports) fails before it is sent.

    The span's output is the answer (text, tool calls, usage, why it stopped, the model's
    thinking when its provider returned any as text), which response
    of which model it was (`response_id`, `response_model`) and the server that wrote it
    (`server_address`, `server_port`, from a model that `ReportsServer`); a failed call's
    output is that server, when known. Each request sends the run's depth (`hops`) as
    `HOPS_HEADER`, for a model that is another gateway's (or this one's) `/v1`. With `answers`
    (the run's own agent's calls, and those of an agent it handed the conversation to), each
    token event says `answer: true`."""

    def __init__(
        self,
        model: ChatModel,
        tracer: Tracer,
        parent_id: str | None,
        budget: TokenBudget | None = None,
        *,
        stream: bool = False,
        context_window: int | None = None,
        hops: int = 0,
        answers: bool = False,
    ) -> None:
        self._model = model
        self._headers = {HOPS_HEADER: str(hops)}
        self._tracer = tracer
        self._parent_id = parent_id
        self._budget = budget
        self._stream = stream and bool(tracer.hooks)
        self._window = context_window
        self._answers = answers
        self._reports_window: bool | None = None
        """Asked at the first call, once: a runtime protocol check is slow on Python 3.11."""
        self._reports_server: bool | None = None
        """Asked at the first call's end, once, as `_reports_window` is."""

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def native_output(self) -> bool:
        return holds_output_schema(self._model)  # what it wraps declares (`HoldsOutputSchema`)

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        summary: dict[str, JsonValue] = {"messages": len(messages), "tools": len(tools)}
        async with self._tracer.span(
            "model", self._model.name, parent_id=self._parent_id, input=summary
        ) as span:
            window = await self.context_window()
            if window is not None:
                check_context_window(messages, tools, window, self._model.name)
            with ExitStack() as sending:
                task = anyio.get_current_task().id
                call = _ModelCall(self._tracer, span.id, self._model, sending, self._headers, task)
                _send_from_span(call)
                token = _current_call.set(call)
                try:
                    answer = await self._model.invoke(
                        messages, tools, on_token=self._tokens(span.id, on_token)
                    )
                except BaseException as exc:  # cancelled too: the span says where it went
                    span.output = _server_fields(self._failed_at(exc)) or None
                    raise
                finally:
                    _current_call.reset(token)
            if self._budget is not None:
                self._budget.charge(answer.usage)
            output = answer.model_dump(
                mode="json",
                include={"content", "tool_calls", "usage", "stop_reason", "stop_detail"},
                exclude_defaults=True,
            )
            thinking = thinking_text(answer.raw, answer.content)
            if thinking:
                output["thinking"] = thinking
            if answer.response_id is not None:
                output["response_id"] = answer.response_id
            if answer.response_model is not None:
                output["response_model"] = answer.response_model
            span.output = {**output, **_server_fields(self._server_of(answer))}
            return answer

    async def context_window(self) -> int | None:
        """The window calls are checked against: `context_window`, else what the model
        reports (None: unknown, no check)."""
        if self._window is not None:
            return self._window
        if self._reports_window is None:
            self._reports_window = isinstance(self._model, ReportsContextWindow)
        if self._reports_window:
            return await cast(ReportsContextWindow, self._model).context_window()
        return None

    def _failed_at(self, error: BaseException) -> ServerAddress | None:
        """The server a failed call went to: a fallback list's last model's when all failed
        (telemetry's span of that model's attempt says it)."""
        if isinstance(error, AllModelsFailed) and error.failures:
            return _server_named(self._model, error.failures[-1][0])
        return self._server_of(None)

    def _server_of(self, answer: AssistantMessage | None) -> ServerAddress | None:
        """The server that wrote `answer` (None: that a failed call went to), if the model
        says."""
        if self._reports_server is None:
            self._reports_server = isinstance(self._model, ReportsServer)
        if self._reports_server:
            return cast(ReportsServer, self._model).server_of(answer)
        return None

    def _tokens(self, span_id: str, on_token: TokenCallback | None) -> TokenCallback | None:
        if not self._stream:
            return on_token
        name, tracer, answers = self._model.name, self._tracer, self._answers

        async def traced(delta: str) -> None:
            if answers:
                await tracer.note("model", name, span_id, "token", text=delta, answer=True)
            else:
                await tracer.note("model", name, span_id, "token", text=delta)
            if on_token is not None:
                await on_token(delta)

        return traced


def _send_from_span(call: _ModelCall) -> None:
    """Requests made from now on in the call send the hops and the W3C trace context of the
    call's span (`traceparent`, `tracestate`), as a gateway serving the model continues it,
    and the span is current for an instrumented client's own spans. Not the caller's
    baggage: a provider is no part of the caller's system."""
    if not call.tracer.hooks:  # nothing traced: nothing to continue
        call.sending.enter_context(request_headers(call.headers))
        return
    carrier = call.sending.enter_context(call.tracer.calling_from(call.span_id))
    trace = {key: carrier[key] for key in _TRACE_HEADERS if key in carrier}
    call.sending.enter_context(request_headers({**call.headers, **trace}))


def _server_named(model: ChatModel, name: str) -> ServerAddress | None:
    """The server that model `name` of `model`'s fallback list sends its calls to."""
    if isinstance(model, RecordedModel):
        model = model.wrapped
    if not isinstance(model, FallbackModel):
        return None
    for each in model.models:
        if each.name == name and isinstance(each, ReportsServer):
            return each.server_of(None)
    return None


def _server_fields(server: ServerAddress | None) -> dict[str, JsonValue]:
    if server is None:
        return {}
    return {"server_address": server.host, "server_port": server.port}
