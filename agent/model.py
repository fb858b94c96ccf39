"""The `ChatModel` protocol: one call to a language model.

Cancellation is anyio's: cancelling the calling scope cancels the call. Implementations raise
`ModelError` (see `agent.errors`) for provider failures.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .messages import AssistantMessage, ChatMessage, ToolDefinition

__all__ = [
    "ChatModel",
    "HoldsOutputSchema",
    "LimitsTools",
    "ReportsServer",
    "ServerAddress",
    "TokenCallback",
    "holds_output_schema",
]

TokenCallback = Callable[[str], Awaitable[None]]
"""Receives each streamed text delta as it arrives."""


@runtime_checkable
class ChatModel(Protocol):
    @property
    def name(self) -> str:
        """A label for traces, e.g. `openai:gpt-4.1-mini`; never contains secrets."""
        ...

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        """Answer `messages`, possibly with calls to `tools`.

        Raises `agent.errors.ModelError` when the provider fails.
        """
        ...


@dataclass(frozen=True, slots=True)
class ServerAddress:
    """Where a model's provider is reached: host (a name or an IP address) and port. Never a
    path, a query or credentials."""

    host: str
    port: int


@runtime_checkable
class ReportsServer(Protocol):
    """A model that can tell which server wrote an answer (for telemetry's `server.address`)."""

    def server_of(self, answer: AssistantMessage | None) -> ServerAddress | None:
        """The server that wrote `answer`; with None (the call failed), the server the call
        went to. None when unknown. Never raises."""
        ...


@runtime_checkable
class LimitsTools(Protocol):
    """A model that can tell how many tools its provider takes in one request."""

    @property
    def max_tools(self) -> int | None:
        """The most tools one request may offer, where the provider documents a limit (None:
        it documents none). More is refused by the provider, not here."""
        ...


@runtime_checkable
class HoldsOutputSchema(Protocol):
    """A model that can hold its answer to a JSON schema itself (`output_mode="native"`).

    Its `invoke` reads `agent.native_output.native_output_schema()` and, when that is a
    schema, sends it with the request (as the HTTP providers do: OpenAI's `response_format`,
    Anthropic's `output_config`, Gemini's `responseJsonSchema`), or raises `ModelConfigError`
    for one it cannot hold. A model that does not declare it (`native_output` False, or no
    such attribute) is refused native mode before it is called: it would answer unconstrained.
    A wrapper declares what the model it wraps declares."""

    @property
    def native_output(self) -> bool:
        """Whether its requests hold the answer to the schema native mode gives."""
        ...


def holds_output_schema(model: ChatModel) -> bool:
    """Whether `model` declares it holds its answers to native mode's schema."""
    return isinstance(model, HoldsOutputSchema) and model.native_output
