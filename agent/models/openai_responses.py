"""OpenAI's Responses API (`openai-responses:MODEL`), for its reasoning models above all, and
any server's (`openai-responses:URL#MODEL`: vLLM, Ollama, LM Studio, LiteLLM's proxy).

The o-series and gpt-5 models keep their reasoning from one step to the next only when their
`reasoning` items go back with the calls they led to. Each request is stateless (`store:
false`, as the gateway keeps the conversation itself) and asks for those items' encrypted
content (`include: ["reasoning.encrypted_content"]`). A model that does not reason refuses
that (400 "Encrypted content is not supported with this model"): the request is sent again
without it, and none from then on (one warning says so). `extra_body` may set `store`,
`reasoning` (`{"effort": "high", "summary": "auto"}`) and the rest.

`AssistantMessage.raw` is `{"model": name, "output": [<output items>], "status": ...}`: the
items exactly as OpenAI sent them (a streamed answer's from its `response.completed` event).
When the conversation comes back to this provider, an answer it wrote goes back as those
items, reasoning first, so its encrypted reasoning precedes its function calls as it came.
Only each `function_call`'s call fields change (see `replayed_calls`): its `call_id` is the
one the agent uses, its name one the API takes. Left out: a reasoning item nothing follows
(an answer cut off while reasoning: the API refuses one "without its required following
item"), and, unless `store` is on, one without encrypted content (it would be looked up by
id, which stateless requests cannot). Any other provider's answer goes as its text and calls.

A tool's result is a `function_call_output` under its call's id; its images (JPEG, PNG, GIF,
WebP) go inside it, after its text. A model that refuses them is sent none from then on
(see `openai`). Tool schemas are made as for chat completions; `strict` is always said, as
the Responses API takes a function without it to be strict.

`OpenAICompatibleResponsesModel` (a server's) differs from it as `OpenAICompatibleModel` does
from `OpenAIModel`: the key is optional, schemas are not strict, the number of tools is not
capped, a call whose arguments were not JSON goes back as `{}` (Ollama refuses a request that
holds one), the context window is asked of the server, and each server is a provider of its
own (its reasoning goes back to it alone). A reasoning item with its text and no encrypted
content (vLLM's, for gpt-oss) goes back too: such a server reads the text (vLLM gives gpt-oss
its reasoning so), where OpenAI would look it up by id.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from functools import partial
from typing import Any, TypeGuard

import httpx

from ..errors import ModelHTTPError, ModelResponseError
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
from ._base import HTTPRequest
from ._http import endpoint
from ._json import (
    JSONObject,
    arguments_text,
    arr,
    count,
    identified,
    is_arr,
    is_obj,
    new_call_id,
    obj,
    read_stop,
    text,
    tool_call,
)
from .openai import IMAGE_TYPES, OPENAI_BASE_URL, OpenAIModel
from .openai_responses_stream import ResponseAssembler
from .openai_stream import error_text
from .replayed_calls import raw_calls, sendable_name
from .retry import RetryPolicy
from .settings import ModelSettings, capped_max_tokens

__all__ = ["ENCRYPTED_REASONING", "OpenAICompatibleResponsesModel", "OpenAIResponsesModel"]

ENCRYPTED_REASONING = "reasoning.encrypted_content"
_log = logging.getLogger(__name__)
_STOPS: dict[str, StopReason] = {
    "completed": "end",
    "max_output_tokens": "max_tokens",
    "content_filter": "content_filter",
}


class OpenAIResponsesModel(OpenAIModel):
    """OpenAI's Responses API (`openai-responses:MODEL`)."""

    _kind = "openai-responses"
    _reasoning_text_replayed = False
    """Whether a reasoning item that has its text but no encrypted content goes back."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None,
        base_url: str = OPENAI_BASE_URL,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        strict_tools: bool = True,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            settings=settings,
            retry=retry,
            strict_tools=strict_tools,
        )
        self._url = endpoint(base_url, "/responses")
        self._encrypted_reasoning = True
        """False once the model refused `include` of encrypted reasoning (it does not reason)."""

    async def _answer(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        on_token: TokenCallback | None,
    ) -> AssistantMessage:
        asked = self._encrypted_reasoning
        try:
            return await super()._answer(messages, tools, on_token)
        except ModelHTTPError as refused:
            if not (asked and _refuses_encrypted_reasoning(refused)):
                raise
            self._encrypted_reasoning = False
            answer = await super()._answer(messages, tools, on_token)
            _log.warning(
                "%s refused %s (%s): a model that does not reason; it is asked for none from "
                "now on",
                self.name,
                ENCRYPTED_REASONING,
                refused,
            )
            return answer

    def _request(
        self, messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], *, stream: bool
    ) -> HTTPRequest:
        offered = {tool.name for tool in tools}
        body: JSONObject = {
            "model": self._model,
            "input": self._input(messages, offered),
            "store": False,
        }
        if self._encrypted_reasoning:
            body["include"] = [ENCRYPTED_REASONING]
        if tools:
            body["tools"] = [self._function(tool) for tool in tools]
        native = native_output_schema()
        if native is not None:
            body["text"] = {
                "format": {
                    "type": "json_schema",
                    "name": NATIVE_OUTPUT_NAME,
                    "schema": native,
                    "strict": True,
                }
            }
        max_tokens = capped_max_tokens(self._settings)
        if max_tokens is not None:
            body["max_output_tokens"] = max_tokens
        if self._settings.temperature is not None:
            body["temperature"] = self._settings.temperature
        if self._settings.top_p is not None:
            body["top_p"] = self._settings.top_p
        if stream:
            body["stream"] = True
        headers = {"Authorization": f"Bearer {self._secret.reveal()}"} if self._secret else {}
        return HTTPRequest(url=self._url, body=body, headers=headers)

    def _function(self, tool: ToolDefinition) -> JSONObject:
        """A function tool: the chat completions one (schema, description, strictness)
        flattened, `strict` said either way (unsaid, it is true here)."""
        function = obj(self._wire_tool(tool).get("function"))
        return {"type": "function", **function, "strict": function.get("strict") is True}

    def _input(self, messages: Sequence[ChatMessage], offered: Collection[str]) -> list[Any]:
        """`offered`: the request's tool names, which calls go back under as they are."""
        items: list[Any] = []
        for message in messages:
            if isinstance(message, SystemMessage | UserMessage):
                items.append({"role": message.role, "content": message.content})
            elif isinstance(message, ToolMessage):
                items.append(self._call_output(message))
            else:
                items.extend(self._assistant_items(message, offered))
        return items

    def _call_output(self, message: ToolMessage) -> JSONObject:
        images = [
            {"type": "input_image", "image_url": f"data:{part.media_type};base64,{part.data}"}
            for part in message.media
            if self._send_images and part.type == "image" and part.media_type in IMAGE_TYPES
        ]
        output: Any = message.content
        if images:
            output = [{"type": "input_text", "text": message.content}, *images]
        return {"type": "function_call_output", "call_id": message.tool_call_id, "output": output}

    def _assistant_items(self, message: AssistantMessage, offered: Collection[str]) -> list[Any]:
        if self._replayable(message):
            output = obj(message.raw).get("output")
            if is_arr(output):
                stored = self._settings.extra_body.get("store") is True
                sent = _sendable(output, stored=stored, with_text=self._reasoning_text_replayed)
                replayed = partial(
                    _replayed_call, offered=offered, as_written=self._replay_invalid_arguments
                )
                own = raw_calls(sent, message.tool_calls, _is_function_call, replayed)
                if own is not None:
                    return own
        items: list[Any] = []
        if message.content:
            items.append({"role": "assistant", "content": message.content})
        items.extend(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": sendable_name(call.name, offered),
                "arguments": self._arguments(call),
            }
            for call in message.tool_calls
        )
        return items

    def _parse(self, data: Any, tools: Sequence[ToolDefinition]) -> AssistantMessage:
        body = obj(data)
        if "output" not in body:
            detail = error_text(body.get("error")) or "no output in the answer"
            raise ModelResponseError(f"{self.name}: {detail}")
        return self._response(body)

    def _response(self, body: JSONObject) -> AssistantMessage:
        """The message in a response object, whole or from a stream's end event."""
        status = body.get("status")
        if status in ("failed", "cancelled") or body.get("error"):
            detail = error_text(body.get("error")) or f"the response was {status}"
            raise ModelResponseError(f"{self.name}: {detail}")
        output = arr(body.get("output"))
        said: list[str] = []
        refused: list[str] = []
        calls: list[ToolCall] = []
        for item in map(obj, output):
            if item.get("type") == "message":
                for part in map(obj, arr(item.get("content"))):
                    if part.get("type") == "output_text":
                        said.append(text(part.get("text")))
                    elif part.get("type") == "refusal":
                        refused.append(text(part.get("refusal")))
            elif item.get("type") == "function_call":
                call_id = text(item.get("call_id")) or new_call_id()
                calls.append(tool_call(call_id, text(item.get("name")), item.get("arguments")))
        # Why it stopped short is the reason of its `incomplete_details`, else its status.
        why = obj(body.get("incomplete_details")).get("reason") if status == "incomplete" else None
        reason, detail = read_stop(why or status, _STOPS)
        if calls and reason in (None, "end"):
            reason = "tool_calls"
        content, refusal = "".join(said), "".join(refused)
        if refusal and not calls and not content:
            reason, detail = "refusal", None  # said in a `refusal` part; the status says nothing
        answer = AssistantMessage(
            content=content or refusal,
            tool_calls=tuple(calls),
            usage=_usage(body.get("usage")),
            stop_reason=reason,
            stop_detail=detail,
            provider=self._provider,
            raw={"model": self.name, "output": output, "status": status},
        )
        return identified(answer, body.get("id"), body.get("model"))

    def _assembler(self, tools: Sequence[ToolDefinition]) -> ResponseAssembler:
        return ResponseAssembler(label=self.name, build=self._response)


class OpenAICompatibleResponsesModel(OpenAIResponsesModel):
    """Any server's Responses API (`openai-responses:URL#MODEL`): vLLM, Ollama, LM Studio,
    LiteLLM's proxy (see the module docstring for how it differs from OpenAI's)."""

    max_tools = None  # OpenAI's limit is its own; these servers document none
    _own_server = True
    _schema_refs = False
    _replay_invalid_arguments = False
    _reasoning_text_replayed = True

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        settings: ModelSettings | None = None,
        retry: RetryPolicy | None = None,
        strict_tools: bool = False,
    ) -> None:
        super().__init__(
            model,
            api_key=api_key,
            base_url=base_url,
            http_client=http_client,
            settings=settings,
            retry=retry,
            strict_tools=strict_tools,
        )


def _refuses_encrypted_reasoning(error: ModelHTTPError) -> bool:
    said = f"{error} {error.provider_message or ''}".lower()
    return 400 <= error.status_code < 500 and (
        "encrypted content" in said or ENCRYPTED_REASONING in said
    )


def _is_function_call(item: Any) -> TypeGuard[JSONObject]:
    return is_obj(item) and item.get("type") == "function_call"


def _sendable(output: list[Any], *, stored: bool, with_text: bool) -> list[Any]:
    """The output items that may go back: not a reasoning item nothing follows, nor, in a
    stateless request (`stored` false), one without encrypted content (unless `with_text`:
    one with its text goes, to a server that reads it)."""
    last = len(output) - 1
    return [
        item
        for place, item in enumerate(output)
        if not (is_obj(item) and item.get("type") == "reasoning")
        or (
            place < last
            and (stored or item.get("encrypted_content") or (with_text and _has_text(item)))
        )
    ]


def _has_text(reasoning: JSONObject) -> bool:
    """Whether a reasoning item carries its text (`content`, as vLLM sends gpt-oss's)."""
    return any(text(obj(part).get("text")) for part in arr(reasoning.get("content")))


def _replayed_call(
    item: JSONObject, call: ToolCall, *, offered: Collection[str], as_written: bool
) -> JSONObject:
    """A `function_call` item as it goes back: under the id the agent uses for its call, with
    a name the API takes; its arguments the model's own text (when it wrote them malformed,
    the agent told it so), or `{}` for malformed ones unless `as_written`; the rest as it
    came."""
    arguments = item.get("arguments")
    if call.invalid_arguments is not None and not as_written:
        arguments = "{}"
    elif not isinstance(arguments, str):
        arguments = arguments_text(call)
    return {
        **item,
        "call_id": call.id,
        "name": sendable_name(text(item.get("name")), offered),
        "arguments": arguments,
    }


def _usage(value: Any) -> Usage:
    usage = obj(value)
    return Usage(
        input_tokens=count(usage.get("input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        cached_tokens=count(obj(usage.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=count(obj(usage.get("output_tokens_details")).get("reasoning_tokens")),
        requests=1,
    )
