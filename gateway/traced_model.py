"""A ChatModel wrapper that reports each model call to the run's trace and budget."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import cast

from pydantic import JsonValue

from agent import (
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
from agent.models import request_headers, thinking_text

from .run_context import HOPS_HEADER, TokenBudget
from .trace import Tracer

__all__ = ["TracedModel", "note_fallback", "note_retry"]

_TRACE_HEADERS = ("traceparent", "tracestate")

# The model span in progress in this task: lets a FallbackModel built once at start-up report
# into whichever run is calling it.
_current_span: ContextVar[tuple[Tracer, str] | None] = ContextVar("model_span", default=None)


async def note_fallback(failed: str, error: ModelError, next_model: str) -> None:
    """`FallbackModel`'s callback: a note under the current model call's span."""
    current = _current_span.get()
    if current is not None:
        tracer, span_id = current
        # Without the provider's words: they may quote the request, and notes are telemetry.
        said = without_provider_words(error) or type(error).__name__
        await tracer.note("model", failed, span_id, "note", fallback_to=next_model, error=said)


async def note_retry(model: str, said: str) -> None:
    """`RetryPolicy`'s callback: a retry (why, how long, which attempt) is a note under the
    current model call's span, as it is a warning in the log."""
    current = _current_span.get()
    if current is not None:
        tracer, span_id = current
        await tracer.note("model", model, span_id, "note", retry=said)


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
            token = _current_span.set((self._tracer, span.id))
            try:
                with self._sent_headers(span.id) as headers, request_headers(headers):
                    answer = await self._model.invoke(
                        messages, tools, on_token=self._tokens(span.id, on_token)
                    )
            except BaseException:  # cancelled too: the span still says where the call went
                span.output = _server_fields(self._server_of(None)) or None
                raise
            finally:
                _current_span.reset(token)
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

    @contextmanager
    def _sent_headers(self, span_id: str) -> Generator[dict[str, str]]:
        """The request's headers: the hops, and the W3C trace context of the call's span
        (`traceparent`, `tracestate`), as a gateway serving the model continues it. Not the
        caller's baggage: a provider is no part of the caller's system."""
        if not self._tracer.hooks:  # nothing traced: nothing to continue
            yield self._headers
            return
        with self._tracer.calling_from(span_id) as carrier:
            trace = {key: carrier[key] for key in _TRACE_HEADERS if key in carrier}
            yield {**self._headers, **trace} if trace else self._headers

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
        name, tracer = self._model.name, self._tracer
        answer: dict[str, JsonValue] = {"answer": True} if self._answers else {}

        async def traced(delta: str) -> None:
            await tracer.note("model", name, span_id, "token", text=delta, **answer)
            if on_token is not None:
                await on_token(delta)

        return traced


def _server_fields(server: ServerAddress | None) -> dict[str, JsonValue]:
    if server is None:
        return {}
    return {"server_address": server.host, "server_port": server.port}
