"""An event stream's lines end at CR, LF or CRLF only: a model's text or a call's arguments
holding U+2028, U+2029 or U+0085 as they are (JSON lets a string hold them raw; vLLM and
llama.cpp send them so) come through whole on every provider, however the stream is cut."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from agent import ChatModel, ToolDefinition, UserMessage
from agent.errors import ModelConnectionError
from agent.models import (
    AnthropicModel,
    GeminiModel,
    OpenAICompatibleModel,
    OpenAIModel,
    OpenAIResponsesModel,
)
from agent.models._sse import SSELines

from .support import FakeProvider, Sleeps, Tokens, retry_policy

pytestmark = pytest.mark.anyio

ECHO = ToolDefinition(
    name="echo",
    input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
    source_node="echo",
)
SEPARATORS = ["\u2028", "\u2029", "\x85"]
LINE_ENDS = ["\n", "\r\n", "\r"]

Events = list[tuple[str | None, dict[str, Any] | str]]


def openai_events(ch: str) -> Events:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {"id": "chatcmpl-1", "model": "m", "choices": [choice]}

    function = {"name": "echo", "arguments": f'{{"text": "a{ch}'}
    first = {"index": 0, "id": "call_1", "type": "function", "function": function}
    rest = {"index": 0, "function": {"arguments": f'{ch}b"}}'}}
    return [
        (None, chunk({"role": "assistant", "content": f"one{ch}"})),
        (None, chunk({"content": f"{ch}two"})),
        (None, chunk({"tool_calls": [first]})),
        (None, chunk({"tool_calls": [rest]})),
        (None, chunk({}, "tool_calls")),
        (None, "[DONE]"),
    ]


def anthropic_events(ch: str) -> Events:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "one"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ch}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": ch}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "two"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": f'{{"text": "a{ch}'},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": f'{ch}b"}}'},
        },
        {"type": "content_block_stop", "index": 1},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return [(event["type"], event) for event in events]


def gemini_events(ch: str) -> Events:
    def chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate]}

    called = {"functionCall": {"name": "echo", "args": {"text": f"a{ch}{ch}b"}}}
    return [
        (None, chunk({"text": f"one{ch}"})),
        (None, chunk({"text": f"{ch}two"}, called, finish="STOP")),
    ]


def stream(events: Events, end: str, size: int) -> httpx.Response:
    """The events as a provider writes them, raw (not `\\u` escapes), lines ended by `end`,
    in pieces of `size` bytes: cut inside characters, inside a CRLF, anywhere."""
    return in_pieces(written(events, end), size)


def written(events: Events, end: str) -> str:
    text = ""
    for name, data in events:
        if name is not None:
            text += f"event: {name}{end}"
        said = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        text += f"data: {said}{end}{end}"
    return text


def in_pieces(text: str, size: int) -> httpx.Response:
    raw = text.encode()

    async def pieces() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), size):
            yield raw[start : start + size]

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=pieces())


Build = Callable[[FakeProvider, Sleeps], ChatModel]

PROVIDERS: dict[str, tuple[Build, Callable[[str], Events]]] = {
    "openai": (
        lambda fake, sleeps: OpenAIModel(
            "gpt-4.1-mini", api_key="sk-test", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
        openai_events,
    ),
    "openai-compatible": (
        lambda fake, sleeps: OpenAICompatibleModel(
            "http://127.0.0.1:8080/v1",
            "qwen",
            http_client=fake.client(),
            retry=retry_policy(sleeps),
        ),
        openai_events,
    ),
    "anthropic": (
        lambda fake, sleeps: AnthropicModel(
            "claude-sonnet-4-5",
            api_key="sk-ant-test",
            http_client=fake.client(),
            retry=retry_policy(sleeps),
        ),
        anthropic_events,
    ),
    "gemini": (
        lambda fake, sleeps: GeminiModel(
            "gemini-2.5-flash",
            api_key="AIzaSyTest-0123",
            http_client=fake.client(),
            retry=retry_policy(sleeps),
        ),
        gemini_events,
    ),
}


@pytest.mark.parametrize("size", [1, 5, 1 << 16])
@pytest.mark.parametrize("end", LINE_ENDS, ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("ch", SEPARATORS, ids=["u2028", "u2029", "u0085"])
@pytest.mark.parametrize("provider", list(PROVIDERS))
async def test_unicode_line_separators_in_text_and_arguments_come_through_whole(
    provider: str, ch: str, end: str, size: int, sleeps: Sleeps
) -> None:
    build, events = PROVIDERS[provider]
    fake = FakeProvider(stream(events(ch), end, size))
    tokens = Tokens()
    answer = await build(fake, sleeps).invoke([UserMessage(content="hi")], [ECHO], on_token=tokens)
    assert answer.content == f"one{ch}{ch}two"
    assert "".join(tokens.received) == answer.content
    [call] = answer.tool_calls
    assert (call.name, call.arguments, call.invalid_arguments) == (
        "echo",
        {"text": f"a{ch}{ch}b"},
        None,
    )


def test_lines_end_at_cr_lf_and_crlf_only_wherever_the_pieces_are_cut() -> None:
    text = "a\u2028b\x0bc\x0cd\x1ce\x85f\r\ng\rh\ni\r\r\nj\n\nk"
    expected = ["a\u2028b\x0bc\x0cd\x1ce\x85f", "g", "h", "i", "", "j", ""]  # `k` never ends
    for size in range(1, len(text) + 1):
        lines = SSELines()
        got: list[str] = []
        for start in range(0, len(text), size):
            got += lines.feed(text[start : start + size])
        assert got == expected, size
    lines = SSELines()
    assert lines.feed("x\r") == ["x"]
    assert lines.feed("") == []  # an empty piece changes nothing: the LF still ends the CRLF
    assert lines.feed("\ny\n") == ["y"]


def responses_events(ch: str) -> Events:
    message: dict[str, Any] = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": f"one{ch}{ch}two", "annotations": []}],
    }
    done: dict[str, Any] = {
        "id": "resp_1",
        "status": "completed",
        "model": "gpt-5-mini",
        "output": [message],
    }
    events: list[dict[str, Any]] = [
        {"type": "response.output_text.delta", "output_index": 0, "delta": f"one{ch}"},
        {"type": "response.output_text.delta", "output_index": 0, "delta": f"{ch}two"},
        {"type": "response.completed", "response": done},
    ]
    return [(str(event["type"]), event) for event in events]


ENDING: dict[str, tuple[Build, Callable[[str], Events]]] = {
    "openai": (PROVIDERS["openai"][0], lambda ch: openai_events(ch)[:-1]),  # the finish, no [DONE]
    # Its stop reason (in `message_delta`) ends it as well as `message_stop` does.
    "anthropic": (PROVIDERS["anthropic"][0], lambda ch: anthropic_events(ch)[:-1]),
    "gemini": PROVIDERS["gemini"],
    "openai-responses": (
        lambda fake, sleeps: OpenAIResponsesModel(
            "gpt-5-mini", api_key="sk-test", http_client=fake.client(), retry=retry_policy(sleeps)
        ),
        responses_events,
    ),
}
"""Each provider's events, the last of them the one that ends its answer."""


@pytest.mark.parametrize("cut", ["inside-its-data", "before-its-blank-line"])
@pytest.mark.parametrize("provider", list(ENDING))
async def test_a_stream_cut_inside_its_last_event_ended_before_the_answer_was_complete(
    provider: str, cut: str, sleeps: Sleeps
) -> None:
    """The connection dropped inside the end event: an event no blank line ended is dropped,
    as the format says, not read as a garbled ('unreadable') answer nor taken as the end."""
    build, events = ENDING[provider]
    whole = written(events(" "), "\n")
    sent = whole[:-1] if cut == "before-its-blank-line" else whole[: len(whole) - 12]
    fake = FakeProvider(in_pieces(whole, 5), in_pieces(sent, 5))
    answer = await build(fake, sleeps).invoke(
        [UserMessage(content="hi")], [ECHO], on_token=Tokens()
    )
    assert answer.content == "one  two"  # whole, the same events are an answer
    with pytest.raises(ModelConnectionError) as caught:
        await build(fake, sleeps).invoke([UserMessage(content="hi")], [ECHO], on_token=Tokens())
    assert "the stream ended before the answer was complete" in str(caught.value)
    assert len(fake.requests) == 2  # not retried: tokens may have been shown
