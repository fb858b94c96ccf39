"""Answering a server's requests during an agent's tool call, with the agent's own model.

An MCP server may ask its client for a completion mid-call (`sampling/createMessage`). When
the caller is an agent, nobody else is there to ask, so the agent's model answers (text
sampling; sampling with tools would hand the model tools it cannot call, and is refused).
Elicitation needs a person or a client: a served agent's approval question is answered by the
run's own approver (`remote_approvals`), any other goes to the MCP client attending the run
(`ClientQuestions`), or is refused saying why nobody can answer it. Roots are the client's own
to give a server it called, and are refused.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
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

from .run_context import UNATTENDED, ClientQuestions

__all__ = ["ModelAnswers"]

Approvals = Callable[[InputRequest], Awaitable[InputResponse | ErrorData | None]]


class ModelAnswers:
    """A server-request handler backed by a model; `usage` sums what its answers cost.
    `approvals` answers the approval questions it recognises (None for others); `questions`
    the other elicitations (or says why nobody can)."""

    def __init__(
        self,
        model: ChatModel,
        approvals: Approvals | None = None,
        questions: ClientQuestions | str = UNATTENDED,
    ) -> None:
        self._model = model
        self._approvals = approvals
        self._questions = questions
        self.usage = Usage()

    @property
    def handle(self) -> ServerRequestHandler:
        return self._answer

    @property
    def answerable(self) -> dict[str, Any]:
        """What it answers, as client capabilities (`CallContext.answerable`): sampling
        without tools, form elicitation when there are approval questions to answer, and the
        elicitation the attending client declared."""
        elicitation: dict[str, Any] = {"form": {}} if self._approvals is not None else {}
        if isinstance(self._questions, ClientQuestions):
            declared = self._questions.answerable.get("elicitation")
            if isinstance(declared, Mapping):
                # A capability naming no mode means form mode (2025-06-18 clients).
                elicitation = {**elicitation, **(declared or {"form": {}})}
        if not elicitation:
            return {"sampling": {}}
        return {"sampling": {}, "elicitation": elicitation}

    async def _answer(self, request: InputRequest) -> InputResponse | ErrorData:
        if self._approvals is not None:
            decided = await self._approvals(request)
            if decided is not None:
                return decided
        if isinstance(request, types.ElicitRequest):
            questions = self._questions
            if isinstance(questions, ClientQuestions):
                return await questions.ask(request)
            return refusal(request, questions)
        if not isinstance(request, types.CreateMessageRequest):
            return refusal(request, "the tool was called by an agent: it gives no client's roots")
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
