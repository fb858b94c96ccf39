"""Per-model request settings, as typed values."""

from __future__ import annotations

from collections.abc import Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from pydantic import BaseModel, ConfigDict, Field, JsonValue

__all__ = [
    "ModelSettings",
    "added_headers",
    "answer_token_limit",
    "capped_max_tokens",
    "request_headers",
]

_answer_limit: ContextVar[int | None] = ContextVar("agent.models.answer_limit", default=None)
_headers: ContextVar[Mapping[str, str] | None] = ContextVar("agent.models.headers", default=None)


class ModelSettings(BaseModel):
    """What a provider is asked for besides the conversation.

    `stream`: `None` streams exactly when an `on_token` callback is given; `True`/`False`
    force it either way (both paths return the same `AssistantMessage`). `extra_body` is
    merged last into the request body (objects key by key, so a nested option keeps the fields
    beside it), for provider options without a field here (e.g. Anthropic `{"thinking":
    {"type": "enabled", "budget_tokens": 2048}}`, OpenAI `{"reasoning_effort": "high"}`, Gemini
    `{"generationConfig": {"thinkingConfig": {"thinkingBudget": 1024}}}`). `timeout`: seconds
    to wait for the provider's next bytes (its answer, or the next piece of a stream) before
    the call fails; None keeps the client's (300 s by default, for models that think long).
    """

    # No NaN or infinity: the request is JSON, which has neither (`json_body` refuses them).
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = None
    timeout: float | None = Field(default=None, gt=0)
    extra_body: Mapping[str, JsonValue] = Field(default_factory=dict[str, JsonValue])

    def wants_stream(self, has_token_callback: bool) -> bool:
        return has_token_callback if self.stream is None else self.stream


@contextmanager
def answer_token_limit(max_tokens: int) -> Generator[None]:
    """Model calls made in the block ask for at most `max_tokens` output tokens (or their own
    `max_tokens`, if smaller): what an MCP server's sampling request asked for, say. Providers
    read it when they build a request, so it reaches them through any wrapper (a fallback, a
    retry, a trace) without a parameter on every `invoke`."""
    token = _answer_limit.set(max_tokens)
    try:
        yield
    finally:
        _answer_limit.reset(token)


def capped_max_tokens(settings: ModelSettings) -> int | None:
    """The `max_tokens` a provider sends: the settings', capped by the `answer_token_limit`
    of the calling block (None: neither says, the provider's own default applies)."""
    limit = _answer_limit.get()
    if limit is None:
        return settings.max_tokens
    return limit if settings.max_tokens is None else min(limit, settings.max_tokens)


@contextmanager
def request_headers(headers: Mapping[str, str]) -> Generator[None]:
    """HTTP requests to providers made in the block also send `headers` (a gateway's hop
    count, say, which a gateway serving the model reads), through any wrapper, as
    `answer_token_limit` reaches them. A provider's own header of the same name wins."""
    token = _headers.set({**added_headers(), **headers})
    try:
        yield
    finally:
        _headers.reset(token)


def added_headers() -> Mapping[str, str]:
    """The `request_headers` of the calling block (none outside one)."""
    return _headers.get() or {}
