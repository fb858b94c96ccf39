"""Anthropic's Messages API (`anthropic:MODEL`).

`AssistantMessage.raw` is `{"model": name, "content": [<content blocks>], "stop_reason": ...}`:
the blocks exactly as Anthropic sent them, `thinking` (with `signature`) and
`redacted_thinking` included, and a streamed answer is rebuilt into the same blocks. When a
conversation comes back to Anthropic, an assistant message it wrote is sent as those blocks,
so extended thinking with tool use keeps its signatures and the next call does not fail. Only
each `tool_use` block's call fields change (see `replayed_calls`): its `id` is the one the
agent uses (it renames an id the model repeated), a name the API refuses (an empty one) is
fitted, and an input that was not a JSON object goes back as `{}` (the API requires an
object); the model is still told its arguments were malformed. An empty text block without
citations, which Claude may stream before a `tool_use`, is neither kept nor sent back: the
API refuses it.

Anthropic refuses `tool_use`/`tool_result` blocks in a request without `tools`: one that
offers none while its conversation holds calls declares the called tools again, not callable
(`tool_choice` none).

A tool's images go back inside its `tool_result`, as image blocks after its text (base64;
JPEG, PNG, GIF or WebP, what Anthropic reads). Other media (audio, other image types) stay
described in the text only.

Native structured output (`agent.native_output`): the answer's schema goes as
`output_config.format` (see `anthropic_output`), beside the tools, and the answer is the text.

Usage: `input_tokens` counts every prompt token, cache reads and writes included;
`cached_tokens` is the cache reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeGuard

import httpx

from ..errors import MissingApiKey, ModelConfigError, ModelHTTPError, ModelResponseError
from ..messages import (
    AssistantMessage,
    ChatMessage,
    StopReason,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..model import TokenCallback
from ..model_json import read_model_json
from ..native_output import native_output_schema
from ._base import HTTPChatModel, HTTPRequest, cut_short
from ._http import Secret, checked_base_url
from ._json import (
    JSONObject,
    NestedTooDeeply,
    arr,
    count,
    identified,
    is_arr,
    is_obj,
    new_call_id,
    obj,
    read_json,
    read_stop,
    text,
    tool_call,
)
from ._sse import SSEEvent
from .anthropic_output import (
    NO_STRUCTURED_OUTPUTS,
    anthropic_output_schema,
    has_structured_outputs,
)
from .anthropic_schema import PropertyKeys, anthropic_input_schema, anthropic_property_keys
from .replayed_calls import raw_calls, sendable_name
from .retry import RetryPolicy
from .schema import described
from .settings import ModelSettings, capped_max_tokens

__all__ = ["ANTHROPIC_BASE_URL", "ANTHROPIC_VERSION", "AnthropicModel"]

ANTHROPIC_BASE_URL = "https://api.anthropic.com/v1"
ANTHROPIC_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; this is used when the settings give none."""
_STOPS: dict[str, StopReason] = {
    "end_turn": "end",
    "stop_sequence": "end",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "max_tokens",  # cut off just the same
    "refusal": "refusal",
}
IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types Anthropic reads (in a tool result as anywhere else)."""


class AnthropicModel(HTTPChatModel):
    """Claude through the Messages API, with tools, streaming, extended thinking and
    structured outputs."""

    native_output = True  # output_config.format json_schema

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = ANTHROPIC_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not api_key:
            raise MissingApiKey("anthropic needs an API key (ANTHROPIC_API_KEY)")
        name = f"anthropic:{model}"
        super().__init__(
            name=name,
            provider="anthropic",
            secret=Secret(api_key),
            base_url=base_url,
            http_client=http_client,
            retry=retry,
            settings=settings,
        )
        self._model = model
        self._url = checked_base_url(base_url).rstrip("/") + "/messages"

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], *, stream: bool
    ) -> HTTPRequest:
        wire = self._wire_messages(messages, _offered(tools))
        body: JSONObject = {
            "model": self._model,
            "max_tokens": capped_max_tokens(self._settings) or DEFAULT_MAX_TOKENS,
            "messages": wire,
        }
        system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [
                {
                    "name": tool.name,
                    "description": described(tool.description, tool.input_schema),
                    "input_schema": anthropic_input_schema(tool.input_schema),
                }
                for tool in tools
            ]
        elif called := _called_before(wire):
            # Anthropic answers 400 to `tool_use`/`tool_result` blocks in a request without
            # `tools`, and this one offers none (its servers down, a tool-less agent on a
            # session that used tools): the called tools are declared again, and
            # `tool_choice` none keeps the model from calling them, as no tool is offered.
            body["tools"] = [
                {"name": name, "description": _NOT_OFFERED, "input_schema": {"type": "object"}}
                for name in called
            ]
            body["tool_choice"] = {"type": "none"}
        if self._settings.temperature is not None:
            body["temperature"] = self._settings.temperature
        if self._settings.top_p is not None:
            body["top_p"] = self._settings.top_p
        native = native_output_schema()
        if native is not None:
            body["output_config"] = {"format": self._output_format(native)}
        if stream:
            body["stream"] = True
        headers = {"x-api-key": self._key(), "anthropic-version": ANTHROPIC_VERSION}
        return HTTPRequest(url=self._url, body=body, headers=headers)

    def _output_format(self, native: Mapping[str, Any]) -> JSONObject:
        """`output_config.format` for the answer's schema. Raises `ModelConfigError` for a
        model known to have no structured outputs, or a schema they cannot hold."""
        if not has_structured_outputs(self._model):
            raise ModelConfigError(f"{self.name} {NO_STRUCTURED_OUTPUTS}: use output_mode = 'tool'")
        try:
            return {"type": "json_schema", "schema": anthropic_output_schema(native)}
        except ValueError as exc:
            raise ModelConfigError(f"{self.name}: {exc}: use output_mode = 'tool'") from None

    async def _answer(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        try:
            return await super()._answer(messages, tools, on_token)
        except ModelHTTPError as error:
            said = (error.provider_message or "").lower()
            if (
                native_output_schema() is None
                or error.status_code != 400
                or not any(word in said for word in _ABOUT_OUTPUT)
            ):
                raise
            # What the API says of a model without structured outputs ("output_config.format:
            # Extra inputs are not permitted") or a schema too big for it does not say what to do.
            raise ModelHTTPError(
                f"{error} (output_mode 'native' sends output_config.format, which only Claude "
                "models with structured outputs take, and only a schema their grammar can "
                "hold: use output_mode = 'tool' otherwise)",
                status_code=error.status_code,
                provider=error.provider,
                provider_message=error.provider_message,
            ) from None

    def _wire_messages(
        self, messages: Sequence[ChatMessage], offered: _Offered
    ) -> list[JSONObject]:
        """Anthropic alternates user and assistant turns: tool results are user content, and
        consecutive messages of one role become one turn (tool results first, as required).
        `offered`: the request's tool names, which calls go back under as they are, and the
        keys their arguments were declared under where those are not the tool's own."""
        wire: list[JSONObject] = []

        def add(role: str, blocks: list[Any]) -> None:
            if not blocks:
                return  # empty text blocks are rejected; an empty turn is dropped
            if wire and wire[-1]["role"] == role:
                wire[-1]["content"].extend(blocks)
            else:
                wire.append({"role": role, "content": blocks})

        for message in messages:
            if isinstance(message, UserMessage):
                add("user", [{"type": "text", "text": message.content}] if message.content else [])
            elif isinstance(message, ToolMessage):
                add("user", [_tool_result(message)])
            elif isinstance(message, AssistantMessage):
                add("assistant", self._assistant_blocks(message, offered))
        return wire

    def _assistant_blocks(self, message: AssistantMessage, offered: _Offered) -> list[Any]:
        if self._replayable(message):
            original = obj(message.raw).get("content")
            if is_arr(original):
                # The API refuses an empty text block, which Claude may stream before a
                # `tool_use` (and a run stored before it was dropped on arrival holds).
                kept = [block for block in original if not _empty_text(block)]
                replayed = partial(_replayed_tool_use, offered=offered)
                own = raw_calls(kept, message.tool_calls, _is_tool_use, replayed)
                if own is not None:
                    return own
        blocks: list[Any] = []
        if message.content:
            blocks.append({"type": "text", "text": message.content})
        blocks.extend(
            {
                "type": "tool_use",
                "id": call.id,
                "name": sendable_name(call.name, offered),
                "input": _declared_input(call, offered),
            }
            for call in message.tool_calls
        )
        return blocks

    def _parse(self, data: Any, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        body = obj(data)
        if body.get("type") == "error":
            raise ModelResponseError(f"{self.name}: {obj(body.get('error')).get('message')}")
        answer = self._message(
            arr(body.get("content")), body.get("stop_reason"), obj(body.get("usage")), tools
        )
        return identified(answer, body.get("id"), body.get("model"))

    def _message(
        self,
        blocks: list[Any],
        stop_reason: Any,
        usage: JSONObject,
        tools: Sequence[ToolDefinition] = (),
    ) -> AssistantMessage:
        content = "".join(text(b.get("text")) for b in map(obj, blocks) if b.get("type") == "text")
        uses = [b for b in map(obj, blocks) if b.get("type") == "tool_use"]
        keys = _property_keys(tools, {text(b.get("name")) for b in uses})
        calls = tuple(
            tool_call(
                text(b.get("id")) or new_call_id(),
                text(b.get("name")),
                _own_input(b.get("input"), keys.get(text(b.get("name")))),
            )
            for b in uses
        )
        cache_read = count(usage.get("cache_read_input_tokens"))
        reason, detail = read_stop(stop_reason, _STOPS)
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            stop_reason=reason,
            stop_detail=detail,
            usage=Usage(
                input_tokens=count(usage.get("input_tokens"))
                + cache_read
                + count(usage.get("cache_creation_input_tokens")),
                output_tokens=count(usage.get("output_tokens")),
                cached_tokens=cache_read,
                requests=1,
            ),
            provider=self._provider,
            raw={"model": self.name, "content": blocks, "stop_reason": stop_reason},
        )

    def _assembler(self, tools: Sequence[ToolDefinition]) -> _EventAssembler:
        return _EventAssembler(label=self.name, build=partial(self._message, tools=tools))


_ABOUT_OUTPUT = ("output_config", "output_format", "output format", "structured output", "grammar")
"""Words of a 400 about the answer's format (not, say, a tool's `input_schema`)."""

_Offered = Mapping[str, PropertyKeys | None]
"""The request's tool names, each with the keys its arguments were declared under where
those are not its own (see `anthropic_schema`)."""


_NOT_OFFERED = "Called earlier in this conversation; not available now."


def _called_before(wire: list[JSONObject]) -> list[str]:
    """The names of the tools the conversation's `tool_use` blocks call, once each, in order."""
    blocks = (obj(b) for m in wire for b in m["content"])
    return list(dict.fromkeys(text(b.get("name")) for b in blocks if b.get("type") == "tool_use"))


def _offered(tools: Sequence[ToolDefinition]) -> _Offered:
    return {tool.name: anthropic_property_keys(tool.input_schema) for tool in tools}


def _property_keys(tools: Sequence[ToolDefinition], called: set[str]) -> dict[str, PropertyKeys]:
    """The declared keys of the called tools whose arguments were declared under other keys
    than their own."""
    found = (
        (tool.name, anthropic_property_keys(tool.input_schema))
        for tool in tools
        if tool.name in called
    )
    return {name: keys for name, keys in found if keys is not None}


def _own_input(given: Any, keys: PropertyKeys | None) -> Any:
    return given if keys is None else keys.restore(given)


def _declared_input(call: ToolCall, offered: _Offered) -> JSONObject:
    keys = offered.get(call.name)
    return call.arguments if keys is None else keys.declared(call.arguments)


def _tool_result(message: ToolMessage) -> JSONObject:
    block: JSONObject = {"type": "tool_result", "tool_use_id": message.tool_call_id}
    images: list[JSONObject] = [
        {
            "type": "image",
            "source": {"type": "base64", "media_type": part.media_type, "data": part.data},
        }
        for part in message.media
        if part.type == "image" and part.media_type in IMAGE_TYPES
    ]
    if images:
        text_block = [{"type": "text", "text": message.content}] if message.content else []
        block["content"] = [*text_block, *images]
    elif message.content:
        block["content"] = message.content  # an empty text is rejected; none is not
    if message.is_error:
        block["is_error"] = True
    return block


def _empty_text(block: Any) -> bool:
    """Whether `block` is a text block with no text and no citations: the API refuses it
    ("text content blocks must be non-empty")."""
    return (
        is_obj(block)
        and block.get("type") == "text"
        and not block.get("text")
        and not block.get("citations")
    )


def _is_tool_use(block: Any) -> TypeGuard[JSONObject]:
    return is_obj(block) and block.get("type") == "tool_use"


def _replayed_tool_use(block: JSONObject, call: ToolCall, *, offered: _Offered) -> JSONObject:
    """A `tool_use` block as it goes back: under the id the agent uses for its call, with a
    name the API takes, and `{}` for an input that was not a JSON object (kept as its text, so
    the model is told its arguments were malformed: the API answers 400 to any other); the
    rest of it as it came."""
    name = sendable_name(text(block.get("name")), offered)
    replayed = {**block, "id": call.id, "name": name}
    if not is_obj(block.get("input")) or call.invalid_arguments is not None:
        replayed["input"] = {}
    return replayed


@dataclass(slots=True)
class _EventAssembler:
    """Rebuilds the content blocks from `message_start` ... `message_stop` events."""

    label: str
    build: Callable[[list[Any], Any, JSONObject], AssistantMessage]
    _blocks: dict[int, JSONObject] = field(default_factory=dict[int, JSONObject])
    _json: dict[int, list[str]] = field(default_factory=dict[int, list[str]])
    _usage: JSONObject = field(default_factory=dict[str, Any])
    _stop_reason: Any = None
    _stopped: bool = False
    _message_start: JSONObject = field(default_factory=dict[str, Any])
    """The `message` of `message_start`: the response's `id` and `model`."""

    def feed(self, event: SSEEvent) -> str:
        try:
            data = obj(read_json(event.data))
        except NestedTooDeeply as exc:
            raise ModelResponseError(f"{self.label}: a stream event {exc}") from None
        except ValueError:
            raise ModelResponseError(f"{self.label}: unreadable stream event") from None
        kind = data.get("type")
        index = count(data.get("index"))
        if kind == "message_start":
            self._message_start = obj(data.get("message"))
            self._add_usage(obj(self._message_start.get("usage")))
        elif kind == "content_block_start":
            self._blocks[index] = dict(obj(data.get("content_block")))
        elif kind == "content_block_delta":
            return self._delta(index, obj(data.get("delta")))
        elif kind == "content_block_stop":
            self._close(index)
        elif kind == "message_delta":
            self._stop_reason = obj(data.get("delta")).get("stop_reason", self._stop_reason)
            self._add_usage(obj(data.get("usage")))
        elif kind == "message_stop":
            self._stopped = True
        elif kind == "error":
            error = obj(data.get("error"))
            raise ModelResponseError(
                f"{self.label}: stream error: {error.get('type')}: {error.get('message')}"
            )
        return ""

    def _delta(self, index: int, delta: JSONObject) -> str:
        block = self._blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            piece = text(delta.get("text"))
            block["text"] = text(block.get("text")) + piece
            return piece
        if kind == "thinking_delta":
            block["thinking"] = text(block.get("thinking")) + text(delta.get("thinking"))
        elif kind == "signature_delta":
            block["signature"] = text(block.get("signature")) + text(delta.get("signature"))
        elif kind == "input_json_delta":
            self._json.setdefault(index, []).append(text(delta.get("partial_json")))
        elif kind == "citations_delta":
            block["citations"] = [*arr(block.get("citations")), delta.get("citation")]
        return ""

    def _close(self, index: int) -> None:
        pieces = self._json.pop(index, None)
        if pieces is None:
            return
        source = "".join(pieces)
        try:
            value: Any = read_model_json(source) if source.strip() else {}
        except ValueError:  # not JSON, or not what a model may write (`NaN`, nested too deeply)
            value = source  # kept as text: the tool call gets `invalid_arguments`
        self._blocks[index]["input"] = value if is_obj(value) else source

    def _add_usage(self, usage: JSONObject) -> None:
        # `message_delta` repeats counts cumulatively; later non-null values win.
        self._usage.update({k: v for k, v in usage.items() if v is not None})

    def finish(self) -> AssistantMessage:
        # The stop reason arrives in `message_delta`, just before `message_stop`: either shows
        # every block arrived.
        if not self._stopped and self._stop_reason is None:
            raise cut_short(self.label, "message_stop")
        blocks: list[Any] = [
            self._blocks[i] for i in sorted(self._blocks) if not _empty_text(self._blocks[i])
        ]
        answer = self.build(blocks, self._stop_reason, self._usage)
        started = self._message_start
        return identified(answer, started.get("id"), started.get("model"))
