"""Answering a server's requests during an agent's tool call, with the agent's own model.

An MCP server may ask its client for a completion mid-call (`sampling/createMessage`). When
the caller is an agent, nobody else is there to ask, so the agent's model answers (text
sampling; sampling with tools would hand the model tools it cannot call, and is refused).
Elicitation and roots need a person or a client, and are refused with the reason, but for a
served agent's approval question, which the run's own approver answers (`remote_approvals`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import mcp_types as types
from mcp_types import ErrorData, InputRequest, InputResponse

from agent import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ModelError,
    SystemMessage,
    Usage,
    UserMessage,
)
from toolkits import ServerRequestHandler
from toolkits.mcp.server_requests import refusal

__all__ = ["ModelAnswers"]

Approvals = Callable[[InputRequest], Awaitable[InputResponse | ErrorData | None]]


class ModelAnswers:
    """A server-request handler backed by a model; `usage` sums what its answers cost.
    `approvals` answers the approval questions it recognises (None for others)."""

    def __init__(self, model: ChatModel, approvals: Approvals | None = None) -> None:
        self._model = model
        self._approvals = approvals
        self.usage = Usage()

    @property
    def handle(self) -> ServerRequestHandler:
        return self._answer

    @property
    def answerable(self) -> dict[str, Any]:
        """What it answers, as client capabilities (`CallContext.answerable`): sampling
        without tools, and form elicitation when there are approval questions to answer."""
        if self._approvals is None:
            return {"sampling": {}}
        return {"sampling": {}, "elicitation": {"form": {}}}

    async def _answer(self, request: InputRequest) -> InputResponse | ErrorData:
        if self._approvals is not None:
            decided = await self._approvals(request)
            if decided is not None:
                return decided
        if not isinstance(request, types.CreateMessageRequest):
            return refusal(
                request, "the tool was called by an agent: there is no person or client to ask"
            )
        params = request.params
        if params.tools:
            return refusal(request, "an agent answers sampling requests only without tools")
        messages = _messages(params)
        if isinstance(messages, str):
            return refusal(request, messages)
        try:
            answer = await self._model.invoke(messages, [])
        except ModelError as exc:
            return refusal(request, f"the agent's model failed: {exc}")
        self.usage += answer.usage
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text=answer.content),
            model=self._model.name,
            stop_reason="endTurn",
        )


def _messages(params: types.CreateMessageRequestParams) -> list[ChatMessage] | str:
    """Our messages for the request, or why it cannot be put to a text model."""
    messages: list[ChatMessage] = []
    if params.system_prompt:
        messages.append(SystemMessage(content=params.system_prompt))
    for message in params.messages:
        text = _text(message.content)
        if text is None:
            return "an agent answers sampling requests with text content only"
        if message.role == "user":
            messages.append(UserMessage(content=text))
        else:
            messages.append(AssistantMessage(content=text))
    return messages


def _text(
    content: types.SamplingMessageContentBlock | Sequence[types.SamplingMessageContentBlock],
) -> str | None:
    blocks = [content] if not isinstance(content, Sequence) else list(content)
    if not all(isinstance(block, types.TextContent) for block in blocks):
        return None
    return "\n".join(block.text for block in blocks if isinstance(block, types.TextContent))
