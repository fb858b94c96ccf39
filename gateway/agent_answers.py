"""Answering a server's requests during an agent's tool call, with the agent's own model.

An MCP server may ask its client for a completion mid-call (`sampling/createMessage`). When
the caller is an agent, nobody else is there to ask, so the agent's model answers (text
sampling; sampling with tools would hand the model tools it cannot call, and is refused).
Elicitation needs a person or a client: a served agent's approval question is answered by the
run's own approver (`remote_approvals`), any other goes to the MCP client attending the run
(`ClientQuestions`), or is refused saying why nobody can answer it. Roots are the client's own
to give a server it called, and are refused.

Each sampling answer is a model call the run pays for, so a server gets at most
`max_sampling` of them per call (more are refused, with one warning), none once the run's
token budget is spent, and none above the `maxTokens` it asked for. The call's end closes
its answers: a request that comes later is refused, and the answers in progress are waited
for (`settled`), so what every one of them cost is the call's usage.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
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
from agent.models import answer_token_limit
from toolkits import ServerRequestHandler
from toolkits.mcp import DEFAULT_MAX_SAMPLING
from toolkits.mcp.server_requests import refusal

from .run_context import UNATTENDED, ClientQuestions, TokenBudget

__all__ = ["ModelAnswers"]

log = logging.getLogger(__name__)

Approvals = Callable[[InputRequest], Awaitable[InputResponse | ErrorData | None]]
Warn = Callable[[str], Awaitable[None]]


class ModelAnswers:
    """A server-request handler backed by a model, for one call of `server`'s tool; `usage`
    sums what its answers cost. `approvals` answers the approval questions it recognises
    (None for others); `questions` the other elicitations (or says why nobody can).
    `max_sampling` sampling requests are answered while `budget` is not spent; the first
    one refused for the limit is warned of, in the log and to `on_warning`."""

    def __init__(
        self,
        model: ChatModel,
        approvals: Approvals | None = None,
        questions: ClientQuestions | str = UNATTENDED,
        *,
        server: str = "the MCP server",
        max_sampling: int = DEFAULT_MAX_SAMPLING,
        budget: TokenBudget | None = None,
        on_warning: Warn | None = None,
    ) -> None:
        self._model = model
        self._approvals = approvals
        self._questions = questions
        self._server = server
        self._max_sampling = max_sampling
        self._budget = budget
        self._on_warning = on_warning
        self.usage = Usage()
        self._sampled = 0
        """Sampling requests taken (answered, or being answered)."""
        self._answering = 0
        self._idle: anyio.Event | None = None
        self._closed = False
        self._warned = False

    def close(self) -> None:
        """The call ended: the server's requests from now on are refused (a server that did
        not wait for its answers may still be sending them)."""
        self._closed = True

    async def settled(self) -> None:
        """Wait for the sampling answers in progress: their usage is the call's. Each is one
        model call, bounded by that model's own timeouts."""
        while self._answering:
            self._idle = anyio.Event()
            await self._idle.wait()

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
        # A server allowed no sampling is not told it may ask.
        sampling: dict[str, Any] = {"sampling": {}} if self._max_sampling else {}
        if not elicitation:
            return sampling
        return {**sampling, "elicitation": elicitation}

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
        return await self._sample(request)

    async def _sample(self, request: types.CreateMessageRequest) -> InputResponse | ErrorData:
        params = request.params
        if params.tools:
            return refusal(request, "an agent answers sampling requests only without tools")
        messages = _messages(params)
        if isinstance(messages, str):
            return refusal(request, messages)
        if self._closed:
            return refusal(request, "the tool call it was sent during has ended")
        if self._budget is not None and self._budget.exceeded:
            return refusal(request, "the agent's token budget is spent")
        if self._sampled >= self._max_sampling:
            await self._warn_of_limit()
            return refusal(
                request,
                f"the agent's model answers at most {self._max_sampling} sampling requests "
                "per tool call (max_sampling in the gateway's config of this server)",
            )
        self._sampled += 1
        self._answering += 1
        try:
            with answer_token_limit(params.max_tokens):
                answer = await self._model.invoke(messages, [])
        except ModelError as exc:
            return refusal(request, f"the agent's model failed: {exc}")
        finally:
            self._answering -= 1
            if not self._answering and self._idle is not None:
                self._idle.set()
        self.usage += answer.usage
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(text=answer.content),
            model=self._model.name,
            stop_reason="endTurn",
        )

    async def _warn_of_limit(self) -> None:
        if self._warned:
            return  # said at the first request refused for it
        self._warned = True
        said = (
            f"{self._server} asked for more than {self._max_sampling} completions in one tool "
            f"call: the agent's model answered {self._max_sampling}, the rest are refused "
            "(raise the server's max_sampling to allow more)"
        )
        log.warning("%s", said)
        if self._on_warning is not None:
            await self._on_warning(said)


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
