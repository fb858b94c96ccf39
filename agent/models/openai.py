"""OpenAI chat completions, and the many servers that speak it (`openai-compatible`).

`OpenAICompatibleModel` differs from `OpenAIModel` only where real servers differ: the key is
optional, assistant `content` beside tool calls is `""` (llama.cpp servers answer 500 on
null), a call whose arguments were not JSON is sent back with `{}` (llama.cpp answers 500 to
"Failed to parse tool call arguments as JSON"), `max_tokens` instead of
`max_completion_tokens`, no strict tool schemas, and tool calls written as text in `content`
are recovered (see `text_tool_calls`). A call goes back under the id the agent uses, and a
name the API refuses (`^[a-zA-Z0-9_-]{1,64}$`: an empty one, a made-up `multi_tool_use.parallel`)
is fitted to it unless the request offers a tool of that name (see `replayed_calls`).

A tool message carries text only: a tool's images follow the tool messages of their turn in a
user message (a text naming the call, then its images as `data:` URLs), as other frameworks
send them. JPEG, PNG, GIF and WebP go so; audio and other types stay described in the text. A
model that reads no images (a text-only model, a local server without a vision projector)
refuses such a request: it is sent again without the images, and if that is answered, the
model is sent none from then on (one warning says so); the text describes them still.

A server that refuses a tool description for its length (OpenAI documents 1,024 characters,
not every model enforces them) is sent the request again with each description over the
length it named cut to it, and so from then on (see `openai_descriptions`; one warning names
each tool cut).

A server that refuses `stream_options` (Mistral's API, Azure AI serverless, Databricks, older
Groq: a 4xx naming it) is sent the request again without it, and none from then on (one
warning says so); usage is then read where the server puts it unasked, or is unknown.

`AssistantMessage.raw` is `{"model": name, "message": <the choice's message>, "finish_reason":
...}`; a streamed answer is assembled into the same shape (`openai_stream`). Reasoning text
(DeepSeek's and llama.cpp's `reasoning_content`, vLLM's `reasoning`) is sent back with its
message when the conversation returns to the same provider. A compatible server's answer that
starts with a `<think>` block (see `think_tags`) has it kept out of the answer and of the text
streamed, and sent back as it came, in `content`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import httpx

from ..errors import ModelAuthError, ModelError, ModelHTTPError, ModelResponseError
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
from ..native_output import NATIVE_OUTPUT_NAME, native_output_schema
from ._base import HTTPChatModel, HTTPRequest, StreamAssembler
from ._http import Secret, checked_base_url, endpoint, public_url
from ._json import (
    JSONObject,
    arguments_text,
    arr,
    count,
    identified,
    new_call_id,
    obj,
    read_stop,
    text,
    tool_call,
)
from .content_chunks import chunks_text, replayed_chunks, thinking_of_chunks
from .openai_descriptions import fitted, refused_length
from .openai_stream import REASONING_FIELDS, ChunkAssembler, error_text
from .replayed_calls import sendable_name
from .retry import RetryPolicy
from .schema import described, openai_parameters
from .server_windows import server_window
from .settings import ModelSettings, capped_max_tokens
from .text_tool_calls import looks_like_tool_call, parse_text_tool_calls
from .think_tags import split_think

__all__ = ["OPENAI_BASE_URL", "OpenAICompatibleModel", "OpenAIModel"]

OPENAI_BASE_URL = "https://api.openai.com/v1"
_log = logging.getLogger(__name__)
_STOPS: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "content_filter",
}
OPENAI_MAX_TOOLS = 128
"""Chat completions' `tools` takes at most 128 functions (its API reference); more is a 400,
"array too long"."""

IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image types chat completions read."""


class OpenAIModel(HTTPChatModel):
    """OpenAI's chat completions API (`openai:MODEL`)."""

    max_tools = OPENAI_MAX_TOOLS
    native_output = True  # response_format json_schema, strict (and on compatible servers)

    _null_content_beside_tool_calls = True
    _replay_invalid_arguments = True
    _max_tokens_field = "max_completion_tokens"
    _think_tags = False
    _kind: ClassVar[str] = "openai"
    """The spec's provider: `openai:MODEL`."""
    _own_server: ClassVar[bool] = False
    """A server named by its URL (`KIND:URL#MODEL`): a provider of its own, its context
    window asked of it."""
    _schema_refs: ClassVar[bool] = True
    """Whether tool schemas keep their `$defs` and `$ref`s (see `schema`); written out for
    servers of their own, not all of which read them (older Ollama dropped `$defs`)."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str = OPENAI_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        text_tool_calls: bool = False,
        strict_tools: bool = True,
    ) -> None:
        checked_base_url(base_url)
        name, provider = self._identity(base_url, model)
        super().__init__(
            name=name,
            provider=provider,
            secret=Secret(api_key) if api_key else None,
            base_url=base_url,
            http_client=http_client,
            retry=retry,
            settings=settings,
        )
        self._model = model
        self._base_url = base_url
        self._url = endpoint(base_url, "/chat/completions")
        self._text_tool_calls = text_tool_calls
        self._strict_tools = strict_tools
        self._send_images = True
        """False once the model refused a request for its images (see the module docstring)."""
        self._stream_usage = True
        """False once the server refused `stream_options` (see the module docstring)."""
        self._description_limit: int | None = None
        """The longest tool description the server took, once it refused a longer one."""
        self._cut: dict[str, int] = {}
        """Tools whose description was cut and not yet warned of: their whole length."""
        self._cut_said: set[str] = set()

    @classmethod
    def _identity(cls, base_url: str, model: str) -> tuple[str, str]:
        if not cls._own_server:
            return f"{cls._kind}:{model}", cls._kind
        # Two servers are two providers: what one thought is not replayed to another.
        server = public_url(base_url)
        return f"{cls._kind}:{server}#{model}", f"{cls._kind}:{server}"

    async def _lookup_window(self) -> int | None:
        if not self._own_server:
            return await super()._lookup_window()
        headers = {"Authorization": f"Bearer {self._secret.reveal()}"} if self._secret else {}
        return await server_window(self._http.get_json, self._base_url, self._model, headers)

    async def _answer(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        try:
            return await self._answer_fitting_descriptions(messages, tools, on_token)
        except ModelHTTPError as error:
            if error.status_code != 404 or isinstance(error, ModelAuthError):
                raise
            raise ModelHTTPError(
                str(error) + self._not_found_hint(),
                status_code=error.status_code,
                provider=error.provider,
                provider_message=error.provider_message,
            ) from None

    def _not_found_hint(self) -> str:
        """What to try after a 404: OpenAI-style servers serve under `/v1`."""
        path = urlsplit(self._base_url).path.rstrip("/")
        if re.search(r"/v\d+[a-z]*$", path) or "/openai" in path:
            return ""
        return (
            f". OpenAI-style servers answer under /v1: is the base URL "
            f"{public_url(self._base_url).rstrip('/')}/v1?"
        )

    async def _answer_fitting_descriptions(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        try:
            answer = await self._answer_without_refused_options(messages, tools, on_token)
        except ModelHTTPError as refused:
            limit = refused_length(refused)
            if limit is None or limit >= (self._description_limit or limit + 1):
                raise
            self._description_limit = limit
            answer = await self._answer_without_refused_options(messages, tools, on_token)
        if self._cut:
            _log.warning(
                "%s takes tool descriptions of at most %d characters (it refused a longer "
                "one): each longer one is cut to fit, its end replaced by [...]: %s",
                self.name,
                self._description_limit,
                ", ".join(f"{name!r} ({length} characters)" for name, length in self._cut.items()),
            )
            self._cut_said.update(self._cut)
            self._cut.clear()
        return answer

    async def _answer_without_refused_options(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        stream_usage = self._stream_usage
        try:
            return await self._answer_without_refused_images(messages, tools, on_token)
        except ModelHTTPError as refused:
            if not (stream_usage and _refuses_stream_options(refused)):
                raise
            self._stream_usage = False
            answer = await self._answer_without_refused_images(messages, tools, on_token)
            _log.warning(
                "%s refused stream_options (%s): it is sent none from now on; %s",
                self.name,
                refused,
                "usage is read where the server puts it"
                if answer.usage.input_tokens or answer.usage.output_tokens
                else "the token usage of its streamed answers is unknown (counted as 0)",
            )
            return answer

    async def _answer_without_refused_images(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        images = self._send_images and any(_image_parts(m) for m in _tool_messages(messages))
        if not images:
            return await super()._answer(messages, tools, on_token)
        try:
            return await super()._answer(messages, tools, on_token)
        except ModelHTTPError as refused:
            if not _may_refuse_images(refused):
                raise
            self._send_images = False
            try:
                answer = await super()._answer(messages, tools, on_token)
            except ModelError:
                self._send_images = True  # not the images, then: the first refusal stands
                raise refused from None
            _log.warning(
                "%s refused a request with a tool's images (%s): it is sent none from now "
                "on, only their descriptions",
                self.name,
                refused,
            )
            return answer

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], *, stream: bool
    ) -> HTTPRequest:
        offered = {tool.name for tool in tools}
        body: JSONObject = {
            "model": self._model,
            "messages": self._wire_messages(messages, offered),
        }
        if tools:
            body["tools"] = [self._wire_tool(tool) for tool in tools]
        native = native_output_schema()
        if native is not None:
            schema = {"name": NATIVE_OUTPUT_NAME, "schema": native, "strict": True}
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        max_tokens = capped_max_tokens(self._settings)
        if max_tokens is not None:
            body[self._max_tokens_field] = max_tokens
        if self._settings.temperature is not None:
            body["temperature"] = self._settings.temperature
        if self._settings.top_p is not None:
            body["top_p"] = self._settings.top_p
        if stream:
            body["stream"] = True
            if self._stream_usage:
                body["stream_options"] = {"include_usage": True}
        headers = {"Authorization": f"Bearer {self._secret.reveal()}"} if self._secret else {}
        images = self._send_images and any(_image_parts(m) for m in _tool_messages(messages))
        return HTTPRequest(
            url=self._url,
            body=body,
            headers=headers,
            # A server that cannot read images says so with a 500 (llama.cpp without its
            # projector): sent again, it would say it again; the fallback without them is next.
            unretried=_names_images if images else None,
        )

    def _sent_body(self, body: JSONObject) -> JSONObject:
        if self._stream_usage or "stream_options" not in body:
            return body
        # Refused, even as `extra_body` sets it.
        return {key: value for key, value in body.items() if key != "stream_options"}

    def _wire_tool(self, tool: ToolDefinition) -> JSONObject:
        parameters, strict = openai_parameters(tool.input_schema, keep_refs=self._schema_refs)
        function: JSONObject = {"name": tool.name, "parameters": parameters}
        description = described(tool.description, tool.input_schema)
        limit = self._description_limit
        if limit is not None and len(description) > limit:
            if tool.name not in self._cut_said:
                self._cut[tool.name] = len(description)
            description = fitted(tool.description, tool.input_schema, limit)
        if description:
            function["description"] = description
        if self._strict_tools and strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def _wire_messages(
        self, messages: Sequence[ChatMessage], offered: Collection[str]
    ) -> list[JSONObject]:
        """`offered`: the request's tool names, which calls go back under as they are."""
        wire: list[JSONObject] = []
        images: list[JSONObject] = []  # of the tool messages since the last other message
        for message in messages:
            if isinstance(message, ToolMessage):
                wire.append(
                    {
                        "role": "tool",
                        "tool_call_id": message.tool_call_id,
                        "content": message.content,
                    }
                )
                if self._send_images:
                    images += _image_parts(message)
                continue
            if images:  # after every tool message of the turn: each must follow its call
                wire.append({"role": "user", "content": images})
                images = []
            if isinstance(message, SystemMessage | UserMessage):
                wire.append({"role": message.role, "content": message.content})
            else:
                wire.append(self._wire_assistant(message, offered))
        if images:
            wire.append({"role": "user", "content": images})
        return wire

    def _wire_assistant(self, message: AssistantMessage, offered: Collection[str]) -> JSONObject:
        out: JSONObject = {"role": "assistant", "content": message.content}
        replayable = self._replayable(message)
        original = obj(obj(message.raw).get("message")) if replayable else {}
        block = split_think(text(original.get("content")))[0] if self._think_tags else ""
        if message.tool_calls:
            if not message.content and not block:
                out["content"] = None if self._null_content_beside_tool_calls else ""
            out["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": sendable_name(call.name, offered),
                        "arguments": self._arguments(call),
                    },
                }
                for call in message.tool_calls
            ]
        if block:  # the reasoning goes back where it came, before the answer
            out["content"] = block + message.content
        elif thinking_of_chunks(original.get("content")):  # Mistral's, as it came
            out["content"] = replayed_chunks(arr(original.get("content")), message.content)
        for key in REASONING_FIELDS:
            if isinstance(original.get(key), str):
                out[key] = original[key]
        return out

    def _arguments(self, call: ToolCall) -> str:
        if call.invalid_arguments is not None and not self._replay_invalid_arguments:
            return "{}"
        return arguments_text(call)

    def _parse(self, data: Any, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        body = obj(data)
        choices = arr(body.get("choices"))
        if not choices:
            detail = error_text(body.get("error")) or "no choices in the answer"
            raise ModelResponseError(f"{self.name}: {detail}")
        choice = obj(choices[0])
        answer = self._message(
            obj(choice.get("message")), choice.get("finish_reason"), body.get("usage"), tools
        )
        return identified(answer, body.get("id"), body.get("model"))

    def _message(
        self,
        message: JSONObject,
        finish_reason: Any,
        usage: Any,
        tools: Sequence[ToolDefinition],
    ) -> AssistantMessage:
        refusal = text(message.get("refusal"))
        content = chunks_text(message.get("content")) or refusal
        if self._think_tags:
            content = split_think(content)[1]
        calls = tuple(
            tool_call(
                text(obj(item).get("id")) or new_call_id(),
                text(obj(obj(item).get("function")).get("name")),
                obj(obj(item).get("function")).get("arguments"),
            )
            for item in arr(message.get("tool_calls"))
        )
        if not calls and self._text_tool_calls and tools:
            schemas = {tool.name: tool.input_schema for tool in tools}
            content, calls = parse_text_tool_calls(content, schemas, schemas=schemas)
            if not calls and looks_like_tool_call(content, schemas):
                raise ModelResponseError(
                    f"{self.name}: the model wrote a tool call the gateway could not read "
                    f"({_excerpt(content)}); start the server with the model's tool-call "
                    "parser (llama.cpp: --jinja; vLLM: --enable-auto-tool-choice "
                    "--tool-call-parser NAME), or offer only the tools it names"
                )
        reason, detail = read_stop(finish_reason, _STOPS)
        if refusal and not calls and not chunks_text(message.get("content")):
            # Said in `refusal`, not `content` (the finish_reason, `stop`, says nothing).
            reason, detail = "refusal", None
        return AssistantMessage(
            content=content,
            tool_calls=calls,
            usage=_usage(usage),
            stop_reason=reason,
            stop_detail=detail,
            provider=self._provider,
            raw={"model": self.name, "message": message, "finish_reason": finish_reason},
        )

    def _assembler(self, tools: Sequence[ToolDefinition]) -> StreamAssembler:
        return ChunkAssembler(
            label=self.name,
            build=lambda message, reason, usage: self._message(message, reason, usage, tools),
            think_tags=self._think_tags,
            call_signs=self._text_tool_calls and bool(tools),
        )


class OpenAICompatibleModel(OpenAIModel):
    """Any server with an OpenAI-style `/chat/completions` (`openai-compatible:URL#MODEL`):
    Ollama, vLLM, llama.cpp, LM Studio, DeepSeek..."""

    _null_content_beside_tool_calls = False
    _replay_invalid_arguments = False
    _max_tokens_field = "max_tokens"
    _think_tags = True
    _kind = "openai-compatible"
    _own_server = True
    _schema_refs = False
    max_tools = None  # OpenAI's limit is its own; these servers document none

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        text_tool_calls: bool = True,
        strict_tools: bool = False,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            settings=settings,
            retry=retry,
            text_tool_calls=text_tool_calls,
            strict_tools=strict_tools,
        )


def _tool_messages(messages: Sequence[ChatMessage]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage) and m.media]


def _may_refuse_images(error: ModelHTTPError) -> bool:
    """Whether `error` may be a model refusing images: a request refused as bad (not a key,
    a quota or a rate), or a server error that names them (llama.cpp without a projector)."""
    if error.status_code in (400, 404, 415, 422):
        return True
    said = f"{error} {error.provider_message or ''}"
    return error.status_code >= 500 and _names_images(error.status_code, said)


def _names_images(status: int, said: str) -> bool:
    """Whether a server error's words are about images (llama.cpp: "image input is not
    supported - hint: ... you may need to provide the mmproj")."""
    said = said.lower()
    return status >= 500 and any(w in said for w in ("image", "vision", "multimodal", "mmproj"))


def _refuses_stream_options(error: ModelHTTPError) -> bool:
    """Whether a request was refused for its `stream_options` (422 `extra_forbidden` on it
    from Mistral's API, a 400 naming it elsewhere)."""
    said = f"{error} {error.provider_message or ''}"
    return 400 <= error.status_code < 500 and "stream_options" in said


def _excerpt(content: str) -> str:
    said = " ".join(content.split())
    return repr(said if len(said) <= 120 else said[:120] + "...")


def _image_parts(message: ToolMessage) -> list[JSONObject]:
    """The tool's images, after a text naming the call they came from."""
    parts: list[JSONObject] = [
        {"type": "image_url", "image_url": {"url": f"data:{part.media_type};base64,{part.data}"}}
        for part in message.media
        if part.type == "image" and part.media_type in IMAGE_TYPES
    ]
    if not parts:
        return []
    text_part = {
        "type": "text",
        "text": f"Returned by {message.name} (call {message.tool_call_id}):",
    }
    return [text_part, *parts]


def _usage(value: Any) -> Usage:
    usage = obj(value)
    prompt = obj(usage.get("prompt_tokens_details"))
    completion = obj(usage.get("completion_tokens_details"))
    return Usage(
        input_tokens=count(usage.get("prompt_tokens")),
        output_tokens=count(usage.get("completion_tokens")),
        # DeepSeek reports cache hits at the top level instead of in the details.
        cached_tokens=count(prompt.get("cached_tokens"))
        or count(usage.get("prompt_cache_hit_tokens")),
        reasoning_tokens=count(completion.get("reasoning_tokens")),
        requests=1,
    )
