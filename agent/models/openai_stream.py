"""Rebuilding a chat completion from its `chat.completion.chunk` events.

The assembled message has the shape of a whole answer's `choices[0].message`, so both paths
end in the same `AssistantMessage`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ModelResponseError
from ..messages import AssistantMessage
from ._base import cut_short
from ._json import JSONObject, NestedTooDeeply, arr, identified, is_obj, obj, read_json, text
from ._sse import SSEEvent
from .content_chunks import ChunkList
from .text_tool_calls import CallSignFilter
from .think_tags import ThinkFilter

__all__ = ["REASONING_FIELDS", "ChunkAssembler", "error_text"]

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where servers put reasoning text: DeepSeek's and llama.cpp's, vLLM's."""


def error_text(error: Any) -> str:
    """A provider's `error` value in words: its `message`, or the value itself when it is a
    string (Ollama's `{"error": "model 'm' not found"}`)."""
    if isinstance(error, str):
        return error
    message = obj(error).get("message")
    if isinstance(message, str) and message:
        return message
    return json.dumps(error) if error else ""


@dataclass(slots=True)
class _CallDraft:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


@dataclass(slots=True)
class ChunkAssembler:
    """Rebuilds the choice message from `chat.completion.chunk` events.

    With `think_tags`, the text passed on leaves out a leading `<think>` block (see
    `think_tags`); with `call_signs`, a call the model writes as text (`text_tool_calls`);
    the assembled content keeps both, as the server sent them.
    """

    label: str
    build: Callable[[JSONObject, Any, Any], AssistantMessage]
    think_tags: bool = False
    call_signs: bool = False
    _content: ChunkList = field(default_factory=ChunkList)
    """The answer's text, or its chunks (Mistral's thinking: see `content_chunks`)."""
    _refusal: list[str] = field(default_factory=list[str])
    _reasoning: dict[str, list[str]] = field(default_factory=dict[str, list[str]])
    _calls: dict[int, _CallDraft] = field(default_factory=dict[int, _CallDraft])
    _slots: dict[int, int] = field(default_factory=dict[int, int])
    """The server's `index` of a call to the key of its draft in `_calls`."""
    _finish_reason: Any = None
    _usage: Any = None
    _response_id: str = ""
    _response_model: str = ""
    """The completion's `id` and `model`, which every chunk repeats."""
    _done: bool = False
    _chosen: bool = False
    """Whether any chunk carried the answer's choice (Azure's first one, say, carries none)."""
    _shown: ThinkFilter = field(default_factory=ThinkFilter)
    _signs: CallSignFilter = field(default_factory=CallSignFilter)

    def feed(self, event: SSEEvent) -> str:
        if event.data.strip() == "[DONE]":
            self._done = True
            return ""
        try:
            chunk = obj(read_json(event.data))
        except NestedTooDeeply as exc:
            raise ModelResponseError(f"{self.label}: a stream event {exc}") from None
        except ValueError:
            if event.event == "error":  # llama.cpp's `error:` line (see `_sse`), not JSON
                raise ModelResponseError(f"{self.label}: stream error: {event.data}") from None
            raise ModelResponseError(f"{self.label}: unreadable stream event") from None
        if "error" in chunk:
            raise ModelResponseError(f"{self.label}: stream error: {error_text(chunk['error'])}")
        if event.event == "error":  # llama.cpp's `error:` line holds the error object itself
            detail = error_text(chunk) or event.data
            raise ModelResponseError(f"{self.label}: stream error: {detail}")
        self._response_id = self._response_id or text(chunk.get("id"))
        self._response_model = self._response_model or text(chunk.get("model"))
        # Groq's older API, which refuses stream_options, says usage in `x_groq`.
        usage = chunk.get("usage") or obj(chunk.get("x_groq")).get("usage")
        if usage:
            self._usage = usage
        delta_text = ""
        for choice in map(obj, arr(chunk.get("choices"))):
            if choice.get("index", 0) != 0:
                continue
            self._chosen = True
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
            delta = obj(choice.get("delta"))
            delta_text += self._content.feed(delta.get("content"))
            if isinstance(delta.get("refusal"), str):
                self._refusal.append(delta["refusal"])
            for key in REASONING_FIELDS:
                if isinstance(delta.get(key), str):
                    self._reasoning.setdefault(key, []).append(delta[key])
            for item in map(obj, arr(delta.get("tool_calls"))):
                self._merge_call(item)
        shown = self._shown.feed(delta_text) if self.think_tags else delta_text
        if self.call_signs:
            shown = self._signs.feed(shown, last=self._finish_reason is not None)
        return shown

    def _merge_call(self, item: JSONObject) -> None:
        call_id = text(item.get("id"))
        index = item.get("index")
        if isinstance(index, int):
            slot = self._slots.get(index)
            # A new id at an index already taken is a new call: Ollama, SGLang and some
            # proxies send every call whole at index 0.
            if slot is None or (call_id and self._calls[slot].id not in ("", call_id)):
                slot = self._slots[index] = len(self._calls)
        else:
            # Servers that omit `index` send each call whole, or continue the last one.
            known = {draft.id for draft in self._calls.values()}
            slot = (
                len(self._calls)
                if (call_id and call_id not in known) or not self._calls
                else max(self._calls)
            )
        draft = self._calls.setdefault(slot, _CallDraft())
        draft.id = draft.id or call_id
        function = obj(item.get("function"))
        draft.name = draft.name or text(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            draft.arguments.append(arguments)
        elif is_obj(arguments):
            draft.arguments.append(json.dumps(arguments))

    def finish(self) -> AssistantMessage:
        # Either end will do: some servers stop after the finish_reason, others send [DONE]
        # without one.
        if self._finish_reason is None and not self._done:
            raise cut_short(self.label, "finish_reason or [DONE]")
        if not self._chosen:  # as a whole answer without choices is said
            raise ModelResponseError(f"{self.label}: no choices in the answer")
        message: JSONObject = {"role": "assistant", "content": self._content.content()}
        if self._refusal:
            message["refusal"] = "".join(self._refusal)
        for key, parts in self._reasoning.items():
            message[key] = "".join(parts)
        if self._calls:
            message["tool_calls"] = [
                {
                    "id": draft.id,
                    "type": "function",
                    "function": {"name": draft.name, "arguments": "".join(draft.arguments)},
                }
                for _, draft in sorted(self._calls.items())
            ]
        answer = self.build(message, self._finish_reason, self._usage)
        return identified(answer, self._response_id, self._response_model)
