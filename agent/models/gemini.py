"""Google's Gemini API: `generateContent` and `streamGenerateContent` (`gemini:MODEL`).

`AssistantMessage.raw` is `{"model": name, "parts": [<content parts>], "finish_reason": ...}`
(and `"block_reason"` for a prompt Gemini blocked: no parts, stopped by a content filter):
the parts as Gemini sent them, `thoughtSignature` on function-call and text parts and `thought`
summaries included (streamed text fragments are joined where no signature sits between them).
When the conversation comes back to Gemini, a model turn it wrote is sent as those parts, so
thinking models get their signatures back and do not answer 400; only empty text parts without
a signature are left out (Gemini rejects them).

Gemini 3 refuses a turn whose function calls carry no `thoughtSignature`: to such a model, a
model turn none of whose calls is signed (another provider's, rebuilt; an unsigned Gemini 2.5
turn) goes with Google's documented `skip_thought_signature_validator` on each call.

Gemini may give function calls no id: one is generated (`call_...`) for the agent, and a
function response carries an `id` only when Gemini gave one. A replayed function call changes
in its call fields only (see `replayed_calls`): an `id` Gemini gave is the one the agent uses
(it renames an id the model repeated), a name Gemini refuses (an empty one) is the name its
response goes by (`gemini_name`), and `args` that are not an object (a Struct) go back as `{}`.

Tool names Gemini refuses (it wants `^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`; a server called `1pw`
gives `1pw__image`) are declared under a name it takes (`_1pw__image`), and its calls are read
back under the tool's own name; arguments declared as JSON text (a free-form object, a value
the schema leaves open; see `gemini_schema`) are read back into what the text says. `raw` keeps Gemini's own names and
arguments, as they go back to it.

A failed call's result goes as `{"error": ...}` in its function response, a result as
`{"result": ...}`.

A tool's images and audio follow the function responses of their turn as `inlineData` parts
(each tool's after a text part naming it): every Gemini model reads those, where media inside
`functionResponse.parts` are for Gemini 3 models only. Types Gemini does not read stay
described in the function response's text only.

Usage: `output_tokens` is candidates plus thoughts (what is billed as output);
`reasoning_tokens` the thoughts.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeGuard

import httpx

from ..errors import MissingApiKey, ModelConfigError, ModelResponseError
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
from .gemini_schema import gemini_json_text_fields
from .replayed_calls import raw_calls
from .retry import RetryPolicy
from .schema import described, gemini_parameters
from .settings import ModelSettings, capped_max_tokens

__all__ = ["GEMINI_BASE_URL", "GeminiModel", "schema_beside_tools"]

GEMINI_BASE_URL = "https://generativelanguage.googleapis.com/v1beta"
_FILTERED = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
_STOPS: dict[str, StopReason] = {
    "STOP": "end",
    "MAX_TOKENS": "max_tokens",
    **dict.fromkeys(_FILTERED, "content_filter"),
    "MALFORMED_FUNCTION_CALL": "malformed_tool_call",
    "UNEXPECTED_TOOL_CALL": "malformed_tool_call",
}


MEDIA_TYPES = frozenset(
    {
        *("image/png", "image/jpeg", "image/webp", "image/heic", "image/heif"),
        *("audio/wav", "audio/mp3", "audio/mpeg", "audio/aiff", "audio/aac", "audio/ogg"),
        "audio/flac",
    }
)
"""The image and audio types Gemini reads inline."""


def schema_beside_tools(model: str) -> bool:
    """Whether the Gemini `model` takes a response schema in a request with function
    declarations: before Gemini 3 it answers "Function calling with a response mime type:
    'application/json' is unsupported"."""
    return re.match(r"(models/)?gemini-[12][.-]", model) is None


class GeminiModel(HTTPChatModel):
    """Gemini with function calling, streaming and thought signatures."""

    native_output = True  # generationConfig.responseJsonSchema

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str = GEMINI_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not api_key:
            raise MissingApiKey("gemini needs an API key (GEMINI_API_KEY)")
        model = model.removeprefix("models/")
        name = f"gemini:{model}"
        super().__init__(
            name=name,
            provider="gemini",
            secret=Secret(api_key),
            base_url=base_url,
            http_client=http_client,
            retry=retry,
            settings=settings,
        )
        # The key travels in a header, never in the URL, so no URL can leak it.
        self._url = f"{checked_base_url(base_url).rstrip('/')}/models/{model}"
        self._signs_calls = _wants_signed_calls(model)

    def _window_lookup(self) -> tuple[str, dict[str, str], Callable[[Any], int | None]] | None:
        def read(data: Any) -> int | None:
            value = obj(data).get("inputTokenLimit")  # models.get reports it for every model
            return value if isinstance(value, int) and value > 0 else None

        return self._url, {"x-goog-api-key": self._key()}, read

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], *, stream: bool
    ) -> HTTPRequest:
        body: JSONObject = {}
        system = "\n\n".join(m.content for m in messages if isinstance(m, SystemMessage))
        if system:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        names = gemini_names([tool.name for tool in tools])
        body["contents"] = self._wire_contents(messages, names)
        if tools:
            declarations = [_declaration(tool, names[tool.name]) for tool in tools]
            body["tools"] = [{"functionDeclarations": declarations}]
        config: JSONObject = {}
        max_tokens = capped_max_tokens(self._settings)
        if max_tokens is not None:
            config["maxOutputTokens"] = max_tokens
        if self._settings.temperature is not None:
            config["temperature"] = self._settings.temperature
        if self._settings.top_p is not None:
            config["topP"] = self._settings.top_p
        native = native_output_schema()
        if (
            native is not None
            and tools
            and not schema_beside_tools(self.name.removeprefix("gemini:"))
        ):
            raise ModelConfigError(
                f"{self.name} takes no response schema beside function calling (Gemini 3 "
                "does): use output_mode = 'tool' for an agent with tools"
            )
        if native is not None:
            config["responseMimeType"] = "application/json"
            # `responseJsonSchema` takes JSON Schema as it is: `responseSchema` (the OpenAPI
            # subset tool declarations use) would cut a recursive `$ref`, merge a tuple's
            # items, and drop `const`, number enums and `additionalProperties`.
            config["responseJsonSchema"] = native
        if config:
            body["generationConfig"] = config
        url = (
            f"{self._url}:streamGenerateContent?alt=sse"
            if stream
            else f"{self._url}:generateContent"
        )
        return HTTPRequest(url=url, body=body, headers={"x-goog-api-key": self._key()})

    def _wire_contents(
        self, messages: Sequence[ChatMessage], names: Mapping[str, str]
    ) -> list[JSONObject]:
        """Consecutive messages of one role become one turn: all function responses to a model
        turn must arrive together in the next user turn. Tools go by their names on the wire
        (`names`)."""
        contents: list[JSONObject] = []
        gemini_ids: set[str] = set()
        media: list[JSONObject] = []  # of the tool results since the last model turn

        def add(role: str, parts: list[Any]) -> None:
            if not parts:
                return
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})

        for message in messages:
            if isinstance(message, ToolMessage):
                # A failed call's words go under `error`, as Google's docs ask ("the response
                # can have an "error" key to return error details to the model").
                said = "error" if message.is_error else "result"
                response: JSONObject = {
                    "name": names.get(message.name) or gemini_name(message.name),
                    "response": {said: message.content},
                }
                if message.tool_call_id in gemini_ids:
                    response["id"] = message.tool_call_id
                add("user", [{"functionResponse": response}])
                media += _media_parts(message)
                continue
            add("user", media)  # after all function responses: Gemini counts them as a block
            media = []
            if isinstance(message, AssistantMessage):
                parts = self._model_parts(message, names)
                if self._signs_calls:
                    parts = _signed_calls(parts)
                ids = (text(obj(obj(part).get("functionCall")).get("id")) for part in parts)
                gemini_ids.update(i for i in ids if i)
                add("model", parts)
            elif isinstance(message, UserMessage):
                add("user", [{"text": message.content}] if message.content else [])
        add("user", media)
        return contents

    def _model_parts(self, message: AssistantMessage, names: Mapping[str, str]) -> list[Any]:
        if self._replayable(message):
            original = obj(message.raw).get("parts")
            if is_arr(original):
                # Gemini rejects the empty text parts it streams after function calls; a part
                # with a `thoughtSignature` is not plain text and always goes back.
                kept = [p for p in original if not (_plain_text(obj(p)) and not obj(p)["text"])]
                replayed = raw_calls(kept, message.tool_calls, _is_function_call, _replayed_call)
                if replayed is not None:
                    return replayed
        parts: list[Any] = [{"text": message.content}] if message.content else []
        parts.extend(
            {
                "functionCall": {
                    "name": names.get(call.name) or gemini_name(call.name),
                    "args": call.arguments,
                }
            }
            for call in message.tool_calls
        )
        return parts

    def _parse(self, data: Any, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        if is_arr(data):
            # streamGenerateContent without `alt=sse` (a proxy may drop the query): the
            # stream's chunks in one JSON array.
            assembler = self._assembler(tools)
            for chunk in data:
                assembler.add(obj(chunk))
            return assembler.finish()
        body = obj(data)
        answer = self._parse_body(body, tools)
        return identified(answer, body.get("responseId"), body.get("modelVersion"))

    def _parse_body(self, body: JSONObject, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        """The message of a whole `generateContent` answer (`_parse` adds its identity)."""
        candidates = arr(body.get("candidates"))
        if not candidates:
            blocked = _block_reason(body)
            if blocked is None:
                raise ModelResponseError(f"{self.name}: no candidates in the answer")
            return self._blocked(blocked, obj(body.get("usageMetadata")))
        candidate = obj(candidates[0])
        parts = arr(obj(candidate.get("content")).get("parts"))
        usage = obj(body.get("usageMetadata"))
        return self._message(parts, candidate.get("finishReason"), usage, tools=tools)

    def _message(
        self,
        parts: list[Any],
        finish_reason: Any,
        usage: JSONObject,
        *,
        tools: Sequence[ToolDefinition] = (),
        blocked: str | None = None,
    ) -> AssistantMessage:
        content = "".join(
            text(p.get("text")) for p in map(obj, parts) if "text" in p and not p.get("thought")
        )
        called = [obj(p["functionCall"]) for p in map(obj, parts) if "functionCall" in p]
        by_wire_name: dict[str, ToolDefinition] = {}
        if called:
            names = gemini_names([tool.name for tool in tools])
            by_wire_name = {names[tool.name]: tool for tool in tools}
        calls = tuple(_read_call(call, by_wire_name) for call in called)
        thoughts = count(usage.get("thoughtsTokenCount"))
        reason, detail = read_stop(finish_reason, _STOPS)
        if reason == "end" and calls:
            reason = "tool_calls"  # Gemini says STOP either way
        raw: JSONObject = {"model": self.name, "parts": parts, "finish_reason": finish_reason}
        if blocked is not None:
            reason, detail = "content_filter", f"prompt blocked: {blocked}"
            raw["block_reason"] = blocked
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            stop_reason=reason,
            stop_detail=detail,
            usage=Usage(
                input_tokens=count(usage.get("promptTokenCount")),
                output_tokens=count(usage.get("candidatesTokenCount")) + thoughts,
                cached_tokens=count(usage.get("cachedContentTokenCount")),
                reasoning_tokens=thoughts,
                requests=1,
            ),
            provider=self._provider,
            raw=raw,
        )

    def _blocked(self, reason: str, usage: JSONObject) -> AssistantMessage:
        """The answer to a prompt Gemini's filters blocked before the model saw it: no
        candidate, only `promptFeedback.blockReason`. A content filter's stop, as a candidate
        blocked with `finishReason: SAFETY` is: the item fails and says why, and asking again
        (a resumed run) would be blocked again."""
        return self._message([], None, usage, blocked=reason)

    def _assembler(self, tools: Sequence[ToolDefinition]) -> _ChunkAssembler:
        build = partial(self._message, tools=tools)
        return _ChunkAssembler(label=self.name, build=build, blocked=self._blocked)


def _declaration(tool: ToolDefinition, name: str) -> JSONObject:
    description = described(tool.description, tool.input_schema)
    declaration: JSONObject = {"name": name, "description": description}
    parameters = gemini_parameters(tool.input_schema)
    if parameters is not None:
        declaration["parameters"] = parameters
    return declaration


def _read_call(call: JSONObject, tools: Mapping[str, ToolDefinition]) -> ToolCall:
    """A function call under its tool's own name, with the JSON text Gemini wrote where the
    schema has no Gemini form read back into what it says."""
    name = text(call.get("name"))
    arguments = call.get("args")
    tool = tools.get(name)
    if tool is not None:
        name = tool.name
        json_text = gemini_json_text_fields(tool.input_schema)
        if json_text is not None:
            arguments = json_text.decode(arguments)
    return tool_call(text(call.get("id")) or new_call_id(), name, arguments)


_GEMINI_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}")
_NAME_LENGTH = 64


def gemini_name(name: str) -> str:
    """`name` as Gemini takes a function's name: other characters become `_`, one that does
    not start with a letter or `_` gains a leading `_`, and one too long keeps its head plus
    8 hex digits of a hash of the whole."""
    if _GEMINI_NAME.fullmatch(name):
        return name
    fitted = re.sub(r"[^A-Za-z0-9_.:-]", "_", name)
    if not re.match(r"[A-Za-z_]", fitted):
        fitted = f"_{fitted}"
    if len(fitted) > _NAME_LENGTH:
        fitted = f"{fitted[: _NAME_LENGTH - 9]}_{_digest(name)}"
    return fitted


def gemini_names(names: Sequence[str]) -> dict[str, str]:
    """Each of `names` and the name Gemini is told it by, all different: a name Gemini takes
    as it is keeps it; one changed into a name already taken gains a hash of itself."""
    taken = {name for name in names if _GEMINI_NAME.fullmatch(name)}
    wire: dict[str, str] = {}
    for name in names:
        if name in taken:
            wire[name] = name
            continue
        fitted = gemini_name(name)
        if fitted in taken:
            fitted = f"{fitted[: _NAME_LENGTH - 9]}_{_digest(name)}"
        taken.add(fitted)
        wire[name] = fitted
    return wire


def _digest(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()[:8]


def _block_reason(chunk: JSONObject) -> str | None:
    """`promptFeedback.blockReason` (`SAFETY`, `OTHER`, `PROHIBITED_CONTENT`...), or None."""
    reason = obj(chunk.get("promptFeedback")).get("blockReason")
    return reason if isinstance(reason, str) and reason else None


def _media_parts(message: ToolMessage) -> list[JSONObject]:
    """The tool's media Gemini reads, after a text naming the call they came from."""
    parts: list[JSONObject] = [
        {"inlineData": {"mimeType": part.media_type, "data": part.data}}
        for part in message.media
        if part.media_type in MEDIA_TYPES
    ]
    if not parts:
        return []
    return [{"text": f"Returned by {message.name} (call {message.tool_call_id}):"}, *parts]


_SKIP_SIGNATURE = "skip_thought_signature_validator"
"""The `thoughtSignature` Google documents for function calls Gemini did not write (another
model's, or injected): Gemini 3 refuses a turn whose calls carry no signature (400 "Function
call is missing a thought_signature"), and this one it takes in their place."""

_VERSION = re.compile(r"gemini-(\d+)")


def _wants_signed_calls(model: str) -> bool:
    """Whether `model` refuses function calls without a thought signature: Gemini 3 and later
    (`gemini-3-pro-preview`, `gemini-3.1-flash`); an alias naming no version is not known to."""
    found = _VERSION.match(model)
    return found is not None and int(found.group(1)) >= 3


def _signed_calls(parts: list[Any]) -> list[Any]:
    """A model turn's parts, its calls signed with `_SKIP_SIGNATURE` when none carries a
    signature of its own: another provider's calls, rebuilt, or an unsigned Gemini 2.5 turn.
    A turn Gemini signed goes as it came (of parallel calls it signs the first only)."""
    calls = [part for part in parts if _is_function_call(part)]
    if not calls or any("thoughtSignature" in part for part in calls):
        return parts
    return [
        {**part, "thoughtSignature": _SKIP_SIGNATURE} if _is_function_call(part) else part
        for part in parts
    ]


def _is_function_call(part: Any) -> TypeGuard[JSONObject]:
    return is_obj(part) and "functionCall" in part


def _replayed_call(part: JSONObject, call: ToolCall) -> JSONObject:
    """A `functionCall` part as it goes back: an id Gemini gave is the agent's for the call,
    the name is one Gemini takes (the one its response goes by), `args` are an object; the
    rest of the part (its `thoughtSignature`) as it came."""
    called = obj(part["functionCall"])
    replayed = {**called, "name": gemini_name(text(called.get("name")))}
    if "id" in called:
        replayed["id"] = call.id
    if "args" in called and (not is_obj(called["args"]) or call.invalid_arguments is not None):
        replayed["args"] = {}
    return {**part, "functionCall": replayed}


def _plain_text(part: JSONObject) -> bool:
    return isinstance(part.get("text"), str) and part.keys() <= {"text", "thought"}


@dataclass(slots=True)
class _ChunkAssembler:
    """Rebuilds the candidate's parts from `streamGenerateContent?alt=sse` chunks."""

    label: str
    build: Callable[[list[Any], Any, JSONObject], AssistantMessage]
    blocked: Callable[[str, JSONObject], AssistantMessage]
    _parts: list[JSONObject] = field(default_factory=list[JSONObject])
    _finish_reason: Any = None
    _usage: JSONObject = field(default_factory=dict[str, Any])
    _block_reason: str | None = None
    _seen_candidate: bool = False
    _response_id: str = ""
    _model_version: str = ""
    """The response's `responseId` and `modelVersion`, which every chunk repeats."""

    def feed(self, event: SSEEvent) -> str:
        try:
            chunk = obj(read_json(event.data))
        except NestedTooDeeply as exc:
            raise ModelResponseError(f"{self.label}: a stream event {exc}") from None
        except ValueError:
            raise ModelResponseError(f"{self.label}: unreadable stream event") from None
        return self.add(chunk)

    def add(self, chunk: JSONObject) -> str:
        """Take one chunk already read from JSON; return its text delta."""
        if "error" in chunk:
            raise ModelResponseError(
                f"{self.label}: stream error: {obj(chunk['error']).get('message')}"
            )
        self._block_reason = _block_reason(chunk) or self._block_reason
        self._response_id = self._response_id or text(chunk.get("responseId"))
        self._model_version = self._model_version or text(chunk.get("modelVersion"))
        if chunk.get("usageMetadata"):
            self._usage = obj(chunk["usageMetadata"])
        delta = ""
        for candidate in map(obj, arr(chunk.get("candidates"))[:1]):
            self._seen_candidate = True
            self._finish_reason = candidate.get("finishReason") or self._finish_reason
            for part in map(obj, arr(obj(candidate.get("content")).get("parts"))):
                if "text" in part and not part.get("thought"):
                    delta += text(part.get("text"))
                self._append(dict(part))
        return delta

    def _append(self, part: JSONObject) -> None:
        previous = self._parts[-1] if self._parts else None
        if (
            previous is not None
            and _plain_text(part)
            and _plain_text(previous)
            and bool(part.get("thought")) == bool(previous.get("thought"))
        ):
            previous["text"] = text(previous["text"]) + text(part["text"])
        else:
            self._parts.append(part)

    def finish(self) -> AssistantMessage:
        if not self._seen_candidate:
            if self._block_reason is None:
                raise ModelResponseError(f"{self.label}: no candidates in the answer")
            answer = self.blocked(self._block_reason, self._usage)
        elif self._finish_reason is None:  # sent on the candidate of the last chunk only
            raise cut_short(self.label, "finishReason")
        else:
            answer = self.build(list(self._parts), self._finish_reason, self._usage)
        return identified(answer, self._response_id, self._model_version)
