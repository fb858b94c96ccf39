"""The `ChatModel` protocol: one call to a language model.

Cancellation is anyio's: cancelling the calling scope cancels the call. Implementations raise
`ModelError` (see `agent.errors`) for provider failures.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, runtime_checkable

from .messages import AssistantMessage, ChatMessage, ToolDefinition

__all__ = ["ChatModel", "TokenCallback"]

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
