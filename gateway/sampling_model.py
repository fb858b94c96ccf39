"""The calling MCP client's own model, as a `ChatModel` (MCP sampling with tools).

Each `invoke` becomes one `sampling/createMessage` request to the client whose tool call is
being served: our messages become `SamplingMessage`s (tool calls as `ToolUseContent`, tool
observations as `ToolResultContent`), the agent's tools become MCP tool definitions, and the
client's answer comes back as an `AssistantMessage` with its tool calls.

How the request reaches the client depends on the connection:

- handshake-era connections (2025-11-25, stdio or stateful HTTP) send it at once, over the
  request's back-channel;
- 2026-07-28 connections cannot send requests to the client: the model raises
  `SamplingInputRequired`, the server answers the tool call with an `InputRequiredResult`
  carrying the request, and the client retries the call with the answer in
  `input_responses`. The retried run resumes from its checkpoint, asks the same question, and
  finds the answer under the same key (a digest of the request).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import JsonValue, ValidationError

from agent import (
    AssistantMessage,
    ChatMessage,
    ModelError,
    SystemMessage,
    TokenCallback,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from agent.model_json import json_problem
from agent.models import ModelSettings, capped_max_tokens
from agent.well_formed import well_formed
from toolkits import validation_brief

from .errors import RunPaused

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "WAITING",
    "SamplingInputRequired",
    "SamplingModel",
    "asked_together",
    "no_back_channel",
    "sampling_problem",
    "to_assistant_message",
    "to_sampling_request",
]

DEFAULT_MAX_TOKENS = 4096
DEFAULT_TIMEOUT = 600.0
"""Seconds to wait for the client's answer: a person may have to approve each request."""

PROVIDER = "mcp-sampling"


WAITING = "waiting for the client's model"
"""Why a run pauses for `SamplingInputRequired` (its spans end `paused` with it)."""


class SamplingInputRequired(RunPaused):
    """The client must answer `requests` (by key) before the run can go on (2026-07-28)."""

    def __init__(self, requests: Mapping[str, types.CreateMessageRequest]) -> None:
        said = "input request" if len(requests) == 1 else "input requests"
        super().__init__(f"{WAITING} ({said} {', '.join(requests)})", reason=WAITING)
        self.requests = dict(requests)


def asked_together(signals: Sequence[BaseException]) -> BaseException | None:
    """The pauses of one step's calls, made at once, as the one to raise: the questions for
    the client's model all in one round (the retry answers each, so the step goes on), else
    the first pause (the others ask again then); None if a signal is no pause."""
    if all(isinstance(signal, SamplingInputRequired) for signal in signals):
        asked = cast(Sequence[SamplingInputRequired], signals)
        return SamplingInputRequired({k: r for one in asked for k, r in one.requests.items()})
    return signals[0] if all(isinstance(signal, RunPaused) for signal in signals) else None


def no_back_channel(session: ServerSession) -> str | None:
    """Why the client of this request cannot be asked anything before it ends, or None.

    2026-07-28 clients are asked through input-required rounds; a handshake-era client needs
    a connection that carries requests to it (not stateless HTTP).
    """
    if not session.can_send_request and session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return (
            "the gateway is served --stateless, where a 2025-11-25 client cannot be asked "
            "during a call: use a 2026-07-28 client (asked between rounds), or serve without "
            "--stateless (behind a load balancer, with sticky sessions)"
        )
    return None


def sampling_problem(session: ServerSession, *, with_tools: bool) -> str | None:
    """Why the client of this request cannot be the model, or None."""
    problem = no_back_channel(session)
    if problem is not None:
        return problem
    capabilities = session.client_capabilities
    sampling = capabilities.sampling if capabilities is not None else None
    if sampling is None:
        return "the client does not support sampling"
    if with_tools and sampling.tools is None:
        return "the client supports sampling, but not with tools (sampling.tools)"
    return None


class SamplingModel:
    """Asks the client of one MCP request for each model answer.

    `answers` are the client's responses to earlier rounds' input requests (2026-07-28),
    by key. Raises `ModelError` when the client fails or refuses, `SamplingInputRequired` when
    the answer must come in a later round.
    """

    def __init__(
        self,
        ctx: ServerRequestContext[Any, Any],
        *,
        answers: Mapping[str, types.InputResponse] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        settings: ModelSettings | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._ctx = ctx
        self._answers = dict(answers or {})
        self._settings = settings or ModelSettings()
        self._default_max_tokens = max_tokens
        self._max_tokens = self._settings.max_tokens or max_tokens
        self._timeout = timeout

    def with_settings(self, settings: ModelSettings) -> SamplingModel:
        """The same client's model, asked with another agent's `settings` (each agent of a run
        tree on `model = "sampling"` asks with its own)."""
        return SamplingModel(
            self._ctx,
            answers=self._answers,
            max_tokens=self._default_max_tokens,
            settings=settings,
            timeout=self._timeout,
        )

    @property
    def name(self) -> str:
        return "sampling"

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        session = self._ctx.session
        problem = sampling_problem(session, with_tools=bool(tools))
        if problem is not None:
            raise ModelError(f"cannot use the client's model: {problem}")
        # A server's sampling request this answers for an agent may ask for fewer tokens.
        max_tokens = capped_max_tokens(self._settings) or self._max_tokens
        request = to_sampling_request(
            messages, tools, max_tokens=max_tokens, settings=self._settings
        )
        key = request_key(request)
        answer = self._answers.get(key)
        if answer is not None:
            result = _as_result(answer)
        elif session.can_send_request:
            result = await self._ask(request)
        else:  # 2026-07-28: the answer comes with the client's retry
            raise SamplingInputRequired({key: request})
        message = to_assistant_message(result)
        if on_token is not None and message.content:
            await on_token(message.content)
        return message

    async def _ask(self, request: types.CreateMessageRequest) -> types.CreateMessageResultWithTools:
        try:
            return await self._ctx.session.send_request(
                request,
                types.CreateMessageResultWithTools,
                request_read_timeout_seconds=self._timeout,
                metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
            )
        except NoBackChannelError as exc:
            raise ModelError(f"cannot use the client's model: {exc}") from exc
        except MCPError as exc:
            raise ModelError(f"the client's model failed: {exc.error.message}") from exc
        except ValidationError as exc:
            raise ModelError(
                f"the client's model sent an unreadable answer: {validation_brief(exc, 'it')}"
            ) from exc


def request_key(request: types.CreateMessageRequest) -> str:
    """A stable name for one question: the same conversation gives the same key on any replica."""
    rendered = json.dumps(
        request.params.model_dump(mode="json", by_alias=True, exclude_none=True),
        sort_keys=True,
        separators=(",", ":"),
    )
    digest = hashlib.sha256(rendered.encode()).digest()[:12]
    return "sampling-" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def to_sampling_request(
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolDefinition],
    *,
    max_tokens: int,
    settings: ModelSettings | None = None,
) -> types.CreateMessageRequest:
    """Our conversation as a `sampling/createMessage` request, asked with `settings`' temperature;
    sampling has no `top_p` field, so it goes in the provider metadata the spec passes through."""
    settings = settings or ModelSettings()
    system: list[str] = []
    sampled: list[types.SamplingMessage] = []
    results: list[types.SamplingMessageContentBlock] = []

    def flush_results() -> None:
        # Consecutive observations answer one assistant message: they travel as one user turn.
        if results:
            sampled.append(types.SamplingMessage(role="user", content=list(results)))
            results.clear()

    for message in messages:
        if isinstance(message, ToolMessage):
            media: list[types.ContentBlock] = [
                types.ImageContent(data=part.data, mime_type=part.media_type)
                if part.type == "image"
                else types.AudioContent(data=part.data, mime_type=part.media_type)
                for part in message.media
            ]
            results.append(
                types.ToolResultContent(
                    tool_use_id=message.tool_call_id,
                    content=[types.TextContent(text=message.content), *media],
                    is_error=message.is_error or None,  # unset, as before, for a result
                )
            )
            continue
        flush_results()
        match message:
            case SystemMessage():
                system.append(message.content)
            case UserMessage():
                sampled.append(
                    types.SamplingMessage(
                        role="user", content=types.TextContent(text=message.content)
                    )
                )
            case AssistantMessage():
                sampled.append(
                    types.SamplingMessage(role="assistant", content=_assistant_blocks(message))
                )
    flush_results()
    return types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(
            messages=sampled,
            system_prompt="\n\n".join(system) or None,
            max_tokens=max_tokens,
            temperature=settings.temperature,
            metadata={"top_p": settings.top_p} if settings.top_p is not None else None,
            tools=[_tool(tool) for tool in tools] or None,
        )
    )


def _assistant_blocks(message: AssistantMessage) -> list[types.SamplingMessageContentBlock]:
    blocks: list[types.SamplingMessageContentBlock] = []
    if message.content:
        blocks.append(types.TextContent(text=message.content))
    blocks += [
        types.ToolUseContent(id=call.id, name=call.name, input=dict(call.arguments))
        for call in message.tool_calls
    ]
    # An empty assistant turn still needs a block to be a valid message.
    return blocks or [types.TextContent(text="")]


def _tool(tool: ToolDefinition) -> types.Tool:
    return types.Tool(
        name=tool.name, description=tool.description or None, input_schema=dict(tool.input_schema)
    )


def to_assistant_message(result: types.CreateMessageResultWithTools) -> AssistantMessage:
    """The client's answer as our `AssistantMessage`: text, and tool calls from `tool_use`."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in result.content_as_list:
        match block:
            case types.TextContent():
                texts.append(well_formed(block.text))  # a lone surrogate: U+FFFD
            case types.ToolUseContent():
                arguments: dict[str, JsonValue] = dict(block.input)
                if json_problem(arguments) is None:
                    arguments = well_formed(arguments)
                    calls.append(ToolCall(id=block.id, name=block.name, arguments=arguments))
                else:  # `NaN`, nested too deeply: refused as any provider's (`model_json`)
                    written = json.dumps(arguments)
                    calls.append(ToolCall(id=block.id, name=block.name, invalid_arguments=written))
            case types.ImageContent() | types.AudioContent():
                texts.append(f"[{block.type}: {block.mime_type}]")
            case types.ToolResultContent():
                raise ModelError("the client's model answered with a tool result")
    raw: JsonValue = {"model": result.model, "stop_reason": result.stop_reason}
    return AssistantMessage(
        content="".join(texts),
        tool_calls=tuple(calls),
        usage=Usage(requests=1),
        provider=PROVIDER,
        raw=raw,
        response_model=result.model or None,
    )


def _as_result(answer: types.InputResponse) -> types.CreateMessageResultWithTools:
    if isinstance(answer, types.CreateMessageResultWithTools):
        return answer
    try:
        return types.CreateMessageResultWithTools.model_validate(
            answer.model_dump(by_alias=True, exclude_none=True)
        )
    except ValidationError as exc:
        raise ModelError("the client answered a sampling request with something else") from exc
