"""The chat vocabulary the agent speaks with its models.

Provider-neutral: every provider module maps these to and from its wire format. An
`AssistantMessage` keeps the provider's raw payload (thinking blocks, signatures, reasoning
content) so the next call can send it back exactly.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

__all__ = [
    "STOPPED_SHORT",
    "AssistantMessage",
    "ChatMessage",
    "MediaPart",
    "MediaRecord",
    "StopReason",
    "SystemMessage",
    "ToolCall",
    "ToolDefinition",
    "ToolMessage",
    "Usage",
    "UserMessage",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Usage(_Frozen):
    """Token counts of one model call, or summed over many (`a + b`)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    requests: int = 0
    """Model calls answered: one per answer, however many HTTP attempts (retries) it took."""

    def __add__(self, other: Usage) -> Usage:
        return Usage.model_construct(  # both sides are valid already: skip re-validation
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            requests=self.requests + other.requests,
        )

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class ToolCall(_Frozen):
    """One call the model asked for.

    `invalid_arguments` holds the model's raw argument text when it was not a JSON object; the
    agent answers such a call with an error observation instead of running it.
    """

    id: str
    name: str
    arguments: dict[str, JsonValue] = Field(default_factory=dict[str, JsonValue])
    invalid_arguments: str | None = None


class ToolDefinition(_Frozen):
    """A tool as the agent sees it: plain data handed over by whoever owns the tools."""

    name: str
    description: str = ""
    input_schema: dict[str, JsonValue] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    source_node: str
    is_from_toolkit: bool = False
    hands_off: bool = Field(default=False, exclude_if=lambda hands_off: not hands_off)
    """A call of it hands the item over: its result, when it succeeds, is the item's answer,
    with no further model call (`agent.handoff`). Written only when set: a definition
    without it reads (and hashes, for a recorded model call) as it did before it existed."""


class SystemMessage(_Frozen):
    role: Literal["system"] = "system"
    content: str


class UserMessage(_Frozen):
    role: Literal["user"] = "user"
    content: str


StopReason = Literal[
    "end", "tool_calls", "max_tokens", "content_filter", "refusal", "malformed_tool_call", "other"
]
"""Why a model stopped, in words common to every provider: it was done (`end`), it asked for
tools, it hit its output token limit (the answer is cut off), a content filter or safety
system stopped it, it refused, it wrote a tool call the provider could not read, or
something else the provider named."""

STOPPED_SHORT: frozenset[StopReason] = frozenset(
    {"max_tokens", "content_filter", "refusal", "malformed_tool_call"}
)
"""Stop reasons after which the answer is not whole."""


class AssistantMessage(_Frozen):
    """A model's answer: text, tool calls, usage, and the provider's raw message.

    `provider` names who wrote `raw`; a provider only replays raw payloads that are its own.
    `stop_reason` is None when the model did not say why it stopped; `stop_detail` is the
    provider's own word for it (`length`, `max_tokens`, `SAFETY`), for messages.

    `response_id` and `response_model` say which response of which model this was, for
    telemetry. They describe the call, not the conversation: never serialised, so what a run,
    a chat memory or a recorded call stores of a message (and what a recorded call is looked
    up by) is what it was before they existed, and an older gateway still reads it.
    """

    role: Literal["assistant"] = "assistant"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()
    stop_reason: StopReason | None = None
    stop_detail: str | None = None
    provider: str | None = None
    raw: JsonValue = None
    response_id: str | None = Field(default=None, exclude=True)
    """The provider's id of the response: OpenAI's `chatcmpl-...`, Anthropic's `msg_...`,
    Gemini's `responseId`. None when it gave none."""
    response_model: str | None = Field(default=None, exclude=True)
    """The model that answered, as its provider names it (`gpt-4.1-mini-2025-04-14` when
    `gpt-4.1-mini` was asked). None when it did not say."""


class MediaPart(_Frozen):
    """An image or audio clip a tool returned, for a model that can read it.

    `data` is the base64 text the tool sent; `media_type` its MIME type (`image/png`). The
    observation's text describes it too (`[image: image/png, 4033 bytes]`), in its place among
    the text, so a model (or provider) that cannot take it still learns it was there.
    """

    type: Literal["image", "audio"]
    media_type: str
    data: str

    @property
    def size(self) -> int:
        """Decoded byte count, without decoding."""
        data = self.data.rstrip()
        return len(data) * 3 // 4 - (len(data) - len(data.rstrip("=")))


class MediaRecord(_Frozen):
    """Base of the records that carry `media`: empty, the field is not written at all, so
    what is stored or hashed of a result without media is what it was before media existed
    (chat memory rows, recorded model calls a resumed run looks up, older readers)."""

    media: tuple[MediaPart, ...] = ()

    @model_serializer(mode="wrap")
    def _media_only_when_some(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.media:
            data.pop("media", None)
        return data


class ToolMessage(MediaRecord):
    """The observation for one tool call, as the model will read it: `content` is its text,
    `media` what it showed besides (each also described in `content`, in its place). Providers
    send the media the model can read (see each provider's module) and leave the rest to the
    text."""

    role: Literal["tool"] = "tool"
    tool_call_id: str
    name: str
    content: str
    is_error: bool = Field(default=False, exclude_if=lambda is_error: not is_error)
    """The call failed: `content` says how. Providers with a field for it mark the result so
    (Anthropic's `is_error`, MCP sampling's `isError`); the others have the text alone.
    Written only when set, so what is stored or hashed of a result is what it was before."""


ChatMessage = Annotated[
    SystemMessage | UserMessage | AssistantMessage | ToolMessage, Field(discriminator="role")
]
