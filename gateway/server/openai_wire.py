"""OpenAI's Chat Completions wire: a request read into an agent's question, and the answers,
chunks and errors in OpenAI's shapes (`openai_api` serves them).

A request's last message is the question (the user's); the messages before it are the
conversation so far, given to the agent as that call's history (`AgentItem.history`), so a
client that sends the whole conversation each time (as OpenAI clients do) is answered in it.
System and developer messages join the agent's own system message. Text is read; a message
with other content (an image), a tool message or an assistant's tool calls is refused with
what to do, never dropped. Fields that tune a model (`temperature`, `max_tokens`, ...) and
`tools` are not used: the agent's config decides its model and tools. A `tool_choice` that
asks for a tool call in the answer is refused: the agent never answers with one. A field
of ours, `context` (a JSON object; OpenAI's SDKs send it in `extra_body`), is the run's
context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictBool, ValidationError

from agent import AgentItem, AssistantMessage, ChatMessage, SystemMessage, Usage, UserMessage

__all__ = [
    "ApiError",
    "ChatRequest",
    "chunk",
    "completion",
    "read_request",
    "usage_json",
]

ErrorType = Literal[
    "invalid_request_error", "authentication_error", "permission_error", "server_error"
]


class ApiError(Exception):
    """A request answered with an error in OpenAI's shape: `{"error": {message, type, param,
    code}}` and its HTTP status."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type: ErrorType = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
        headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.code = code
        self.param = param
        self.headers = tuple(headers)
        """Headers of the answer besides its content's (a 405's `allow`)."""

    def json(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")  # clients send fields of their own


class _Part(_Open):
    type: str
    text: str | None = None
    refusal: str | None = None
    """A `refusal` part's (an assistant's)."""


class _Message(_Open):
    role: str
    content: str | list[_Part] | None = None
    refusal: str | None = None
    """An assistant's refusal (its `content` then null), as OpenAI's models give one."""
    tool_calls: list[Any] | None = None


class _StreamOptions(_Open):
    include_usage: StrictBool | None = None


class _Body(_Open):
    model: str
    messages: list[_Message] = Field(min_length=1)
    stream: StrictBool | None = None  # not "yes", which OpenAI refuses too
    stream_options: _StreamOptions | None = None
    n: int | None = None
    tool_choice: str | dict[str, Any] | None = None
    context: dict[str, JsonValue] | None = None
    """Ours, not OpenAI's: the run's context (`metadata`, OpenAI's, takes strings only)."""


@dataclass(frozen=True, slots=True)
class ChatRequest:
    agent: str
    item: AgentItem
    stream: bool
    include_usage: bool


def read_request(body: bytes) -> ChatRequest:
    """The question a Chat Completions request asks, and how to answer it. Raises `ApiError`
    (400) saying what is wrong with it."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise ApiError(400, f"the request body is not JSON: {exc}") from None
    except RecursionError:  # a few KB of brackets: refused as `/mcp` refuses it, not a crash
        raise ApiError(
            400, "the request body is not JSON we read: it is nested too deeply"
        ) from None
    try:
        request = _Body.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        said = f"{where}: {error['msg']}" if where else error["msg"]
        raise ApiError(400, said, param=where or None) from None
    if request.n not in (None, 1):
        raise ApiError(400, "n: an agent gives one answer per request (n = 1)", param="n")
    if _demands_a_call(request.tool_choice):
        raise ApiError(
            400,
            "tool_choice: the agent runs its own tools and answers in text, never with a tool "
            "call for the client to run, so it cannot call the tool asked for: send "
            "tool_choice 'auto' or 'none' (the client's `tools` are not used)",
            param="tool_choice",
        )
    *before, last = request.messages
    if last.role != "user":
        raise ApiError(
            400,
            f"the last message is the question, from role 'user' (it is from {last.role!r})",
            param="messages",
        )
    index = len(request.messages) - 1
    prompt = _text(last, index)
    if not prompt.strip():
        raise ApiError(400, f"messages.{index}.content: the question is empty", param="messages")
    history = _history(before)
    item = AgentItem(prompt=prompt, history=history or None, context=request.context)
    stream = bool(request.stream)
    options = request.stream_options
    include_usage = stream and options is not None and bool(options.include_usage)
    return ChatRequest(request.model, item, stream, include_usage)


def _demands_a_call(choice: str | dict[str, Any] | None) -> bool:
    """Whether `tool_choice` asks for a tool call in the answer: "required", a named
    function (or custom tool), or allowed tools in mode "required"."""
    if isinstance(choice, str):
        return choice == "required"
    if choice is None:
        return False
    if choice.get("type") != "allowed_tools":
        return True
    allowed = choice.get("allowed_tools")
    return isinstance(allowed, dict) and cast("dict[str, Any]", allowed).get("mode") == "required"


def _history(messages: list[_Message]) -> list[ChatMessage]:
    """The conversation before the question, system messages first (they join the agent's)."""
    system: list[ChatMessage] = []
    turns: list[ChatMessage] = []
    for index, message in enumerate(messages):
        text = _text(message, index)
        if message.role in ("system", "developer"):
            system.append(SystemMessage(content=text))
        elif message.role == "user":
            turns.append(UserMessage(content=text))
        elif message.role == "assistant" and not message.tool_calls:
            turns.append(AssistantMessage(content=text))
        else:
            what = "tool calls" if message.role == "assistant" else f"role {message.role!r}"
            raise ApiError(
                400,
                f"messages.{index}: {what} cannot be read: the agent calls its own tools, and "
                "reads a conversation of system, user and assistant text",
                param="messages",
            )
    return system + turns


def _text(message: _Message, index: int) -> str:
    """A message's text: its `content` (a string, or parts joined), and an assistant's
    refusal, which is what it said."""
    content = message.content
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif content is not None:
        texts.extend(_part_text(part, message.role, index) for part in content)
    if message.role == "assistant" and message.refusal:
        texts.append(message.refusal)
    return "".join(texts)


def _part_text(part: _Part, role: str, index: int) -> str:
    where = f"messages.{index}.content"
    if part.type == "text":
        if part.text is None:
            raise ApiError(400, f"{where}: a part of type 'text' has no text", param="messages")
        return part.text
    if part.type == "refusal" and role == "assistant":
        if part.refusal is None:
            raise ApiError(
                400, f"{where}: a part of type 'refusal' has no refusal", param="messages"
            )
        return part.refusal
    raise ApiError(
        400,
        f"{where}: a part of type {part.type!r} cannot be read: the agent reads text parts only",
        param="messages",
    )


def usage_json(usage: Usage) -> dict[str, Any]:
    """A run's usage (its sub-agents' included) as OpenAI counts it."""
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def completion(
    completion_id: str,
    created: int,
    model: str,
    text: str,
    usage: Usage,
    *,
    finish_reason: str = "stop",
) -> dict[str, Any]:
    """A whole answer: a `chat.completion` (`finish_reason` "length": cut at a token limit)."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text, "refusal": None},
                "finish_reason": finish_reason,
                "logprobs": None,
            }
        ],
        "usage": usage_json(usage),
    }


def chunk(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None,
    *,
    finish_reason: str | None = None,
    usage: Usage | None = None,
    include_usage: bool = False,
) -> dict[str, Any]:
    """One `chat.completion.chunk`: a delta, the last one's `finish_reason`, or (no delta)
    the usage chunk, whose `choices` are empty. With `include_usage`, every chunk has a
    `usage` field, null but on the usage chunk (as OpenAI's have)."""
    choices: list[dict[str, Any]] = []
    if delta is not None:
        choices.append(
            {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
        )
    said: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }
    if usage is not None:
        said["usage"] = usage_json(usage)
    elif include_usage:
        said["usage"] = None
    return said
