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
from agent.models import AnthropicModel, GeminiModel, OpenAICompatibleModel, OpenAIModel
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
    text = ""
    for name, data in events:
        if name is not None:
            text += f"event: {name}{end}"
        written = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
        text += f"data: {written}{end}{end}"
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
    expected = ["a\u2028b\x0bc\x0cd\x1ce\x85f", "g", "h", "i", "", "j", "", "k"]
    for size in range(1, len(text) + 1):
        lines = SSELines()
        got: list[str] = []
        for start in range(0, len(text), size):
            got += lines.feed(text[start : start + size])
        assert got + lines.end() == expected, size
    lines = SSELines()
    assert lines.feed("x\r") == ["x"]
    assert lines.feed("") == []  # an empty piece changes nothing: the LF still ends the CRLF
    assert lines.feed("\ny\n") == ["y"]
    assert lines.end() == []
