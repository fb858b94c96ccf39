"""The shape every HTTP provider shares: build a request, post it, read one or many answers.

A provider supplies three things: the request for a conversation, the parser for a whole
answer, and a stream assembler that rebuilds that same whole answer from events, so both paths
end in the same `AssistantMessage`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from ..errors import MissingApiKey, ModelConfigError, ModelConnectionError, ModelResponseError
from ..messages import AssistantMessage, ChatMessage, ToolDefinition
from ..model import ServerAddress, TokenCallback
from ..native_output import native_output_schema
from ._http import ProviderHTTP, Secret, Unretried, url_secrets
from ._json import JSONObject, is_obj
from ._sse import SSEEvent
from .retry import RetryPolicy
from .settings import ModelSettings


@dataclass(frozen=True, slots=True)
class HTTPRequest:
    url: str
    body: JSONObject
    headers: dict[str, str]
    unretried: Unretried | None = None
    """Which error answers to this request fail at once rather than being sent again."""


class StreamAssembler(Protocol):
    def feed(self, event: SSEEvent) -> str:
        """Take one event; return the text delta it carried ("" if none).

        Raises `ModelError` when the event reports a failure.
        """
        ...

    def finish(self) -> AssistantMessage:
        """The whole answer, exactly as the non-streaming path would have returned it.

        Raises `ModelConnectionError` (see `cut_short`) when the provider's end event never
        came: half an answer is not an answer.
        """
        ...


def cut_short(label: str, expected: str) -> ModelConnectionError:
    """The error for a stream that closed before its end event (`expected`, as the provider
    names it). A connection error, as a stream that breaks is: a `FallbackModel` moves on, a
    stopped run resumes later; not retried here, since tokens may have been shown already."""
    return ModelConnectionError(
        f"{label}: the stream ended before the answer was complete (no {expected})"
    )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def server_address(base_url: str) -> ServerAddress | None:
    """The host and port `base_url` reaches (the scheme's port when it names none); None for
    a URL without a host or with a port that is no number."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return ServerAddress(host=parts.hostname, port=port)


def merged(body: JSONObject, extra: Mapping[str, Any]) -> JSONObject:
    """`body` with `extra` merged in: objects in both are merged the same way (Gemini's
    `generationConfig.thinkingConfig` beside the temperature), anything else in `extra` wins."""
    out = dict(body)
    for key, value in extra.items():
        inner = out.get(key)
        out[key] = merged(inner, value) if is_obj(inner) and is_obj(value) else value
    return out


class HTTPChatModel(ABC):
    """A `ChatModel` over one provider's HTTP API. Its repr shows the name, never the key."""

    max_tools: int | None = None
    """The most tools one request may offer, where the provider documents a limit
    (`LimitsTools`). Anthropic's Messages API and Gemini's generateContent document none."""
    native_output: bool = False
    """Whether its requests can hold the answer to a schema (`agent.native_output`): a
    provider that cannot refuses a call made in native mode, rather than answer unheld."""

    def __init__(
        self,
        *,
        name: str,
        provider: str,
        secret: Secret | None,
        base_url: str,
        http_client: httpx.AsyncClient | None,
        retry: RetryPolicy | None,
        settings: ModelSettings | None,
    ) -> None:
        self._name = name
        self._provider = provider
        self._secret = secret
        self._settings = settings or ModelSettings()
        self._http = ProviderHTTP(
            label=name,
            provider=provider,
            client=http_client,
            retry=retry or RetryPolicy(),
            # A server may echo the URL's password (or its Basic token) as it may the key.
            secrets=[*([secret] if secret else []), *url_secrets(base_url)],
            read_timeout=self._settings.timeout,
        )
        self._window: int | None = None
        self._window_asked = False
        self._server = server_address(base_url)

    @property
    def name(self) -> str:
        return self._name

    def _key(self) -> str:
        """The API key, for a provider that cannot be called without one."""
        if self._secret is None:
            raise MissingApiKey(f"{self._name} needs an API key")
        return self._secret.reveal()

    @property
    def provider(self) -> str:
        """The id this model writes into `AssistantMessage.provider`."""
        return self._provider

    @property
    def settings(self) -> ModelSettings:
        return self._settings

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._name!r})"

    def server_of(self, answer: AssistantMessage | None) -> ServerAddress | None:
        """The host and port of the base URL: every answer comes from there (`ReportsServer`)."""
        return self._server

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        """Answer `messages`; raises `ModelError` (see `agent.errors`) when the provider fails."""
        try:
            return await self._answer(messages, tools, on_token)
        except ModelResponseError as error:
            # Built from the provider's own words (an `error` in a 200 body, a stream's error
            # event), which may echo the key: scrubbed here, once for every provider.
            scrubbed = self._http.redact(str(error))
            if scrubbed == str(error):
                raise
            raise ModelResponseError(scrubbed) from None

    async def _answer(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        if native_output_schema() is not None and not self.native_output:
            raise ModelConfigError(
                f"{self.name} has no native structured output: use output_mode = 'tool'"
            )
        stream = self._settings.wants_stream(on_token is not None)
        request = self._request(messages, tools, stream=stream)
        body = self._sent_body(merged(request.body, self._settings.extra_body))
        if not stream:
            data = await self._http.post_json(
                request.url, body, request.headers, unretried=request.unretried
            )
            return self._parse(data, tools)
        assembler = self._assembler(tools)

        async def on_event(event: SSEEvent) -> None:
            delta = assembler.feed(event)
            if delta and on_token is not None:
                await on_token(delta)

        whole = await self._http.post_sse(
            request.url, body, request.headers, on_event, unretried=request.unretried
        )
        if whole is None:
            return assembler.finish()
        answer = self._parse(whole.data, tools)
        if answer.content and on_token is not None:
            await on_token(answer.content)  # one delta: a listener still sees the text
        return answer

    async def context_window(self) -> int | None:
        """The context window the provider reports for this model (asked once), or None.

        A failed lookup is None: the window is a safeguard, never a reason to fail a run."""
        if not self._window_asked:
            self._window_asked = True
            self._window = await self._lookup_window()
        return self._window

    async def _lookup_window(self) -> int | None:
        """Ask the provider for the context window (see `_window_lookup`); None if it fails."""
        lookup = self._window_lookup()
        if lookup is None:
            return None
        url, headers, read = lookup
        data = await self._http.get_json(url, headers)
        return read(data) if data is not None else None

    def _window_lookup(self) -> tuple[str, dict[str, str], Callable[[Any], int | None]] | None:
        """Where the provider tells the model's context window, and how to read it there;
        None for providers that do not tell."""
        return None

    def _sent_body(self, body: JSONObject) -> JSONObject:
        """The body as sent, `extra_body` merged in: a provider may still take a field out."""
        return body

    def _replayable(self, message: AssistantMessage) -> bool:
        """Whether `message.raw` came from this provider and may be sent back verbatim."""
        return message.provider == self._provider and isinstance(message.raw, dict)

    @abstractmethod
    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], *, stream: bool
    ) -> HTTPRequest: ...

    @abstractmethod
    def _parse(self, data: Any, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        """The message in a whole (non-streamed) answer; raises `ModelResponseError`."""

    @abstractmethod
    def _assembler(self, tools: Sequence[ToolDefinition]) -> StreamAssembler: ...
