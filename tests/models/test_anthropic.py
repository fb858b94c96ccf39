"""The Anthropic provider against real-format Messages API answers and event streams."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent.errors import (
    ModelConfigError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
)
from agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agent.model import ServerAddress
from agent.models import AnthropicModel, ModelSettings, answer_token_limit

from .conftest import load_tools
from .support import FakeProvider, Sleeps, Tokens, json_response, raw_of, retry_policy, sse_response

KEY = "sk-ant-api03-test-77f0e1"
TOOLS = load_tools("server-everything")
GET_SUM = next(t for t in TOOLS if t.name == "get-sum")
ASK = [SystemMessage(content="Be brief."), UserMessage(content="Add 17 and 25, and 1 and 2.")]

THINKING = {
    "type": "thinking",
    "thinking": "Two sums; call get-sum twice.",
    "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds",
}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIw"}
TOOL_USES = [
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get-sum",
     "input": {"a": 17, "b": 25}},
    {"type": "tool_use", "id": "toolu_01B19q90qw90lq917835lq8", "name": "get-sum",
     "input": {"a": 1, "b": 2}},
]  # fmt: skip
CONTENT = [THINKING, REDACTED, {"type": "text", "text": "I'll add them."}, *TOOL_USES]


def message(content: list[dict[str, Any]], stop_reason: str = "tool_use") -> dict[str, Any]:
    return {
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 472,
            "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 100,
            "output_tokens": 91,
            "service_tier": "standard",
        },
    }


def model(fake: FakeProvider, sleeps: Sleeps, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-5",
        api_key=KEY,
        http_client=fake.client(),
        retry=retry_policy(sleeps),
        **kwargs,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("own", "sent"), [(None, 300), (100, 100), (1000, 300)])
async def test_an_answer_token_limit_caps_max_tokens(
    sleeps: Sleeps, own: int | None, sent: int
) -> None:
    fake = FakeProvider(json_response(200, message(CONTENT)))
    with answer_token_limit(300):  # what a server's sampling request asked for, say
        await model(fake, sleeps, settings=ModelSettings(max_tokens=own)).invoke(ASK, TOOLS)
    assert fake.body()["max_tokens"] == sent


@pytest.mark.anyio
async def test_request_headers_system_tools_and_parsed_answer(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, message(CONTENT)))
    answer = await model(fake, sleeps, settings=ModelSettings(temperature=0.2)).invoke(ASK, TOOLS)

    request = fake.requests[0]
    assert str(request.url) == "https://api.anthropic.com/v1/messages"
    assert request.headers["x-api-key"] == KEY
    assert request.headers["anthropic-version"] == "2023-06-01"
    body = fake.body()
    assert body["system"] == "Be brief."
    assert body["max_tokens"] == 4096
    assert body["temperature"] == 0.2
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Add 17 and 25, and 1 and 2."}]}
    ]
    get_sum = next(t for t in body["tools"] if t["name"] == "get-sum")
    assert get_sum["input_schema"] == {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "First number"},
            "b": {"type": "number", "description": "Second number"},
        },
        "required": ["a", "b"],
    }
    assert answer.content == "I'll add them."
    assert answer.tool_calls == (
        ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="get-sum", arguments={"a": 17, "b": 25}),
        ToolCall(id="toolu_01B19q90qw90lq917835lq8", name="get-sum", arguments={"a": 1, "b": 2}),
    )
    assert answer.usage == Usage(input_tokens=592, output_tokens=91, cached_tokens=100, requests=1)
    assert answer.provider == "anthropic"
    assert answer.raw == {
        "model": "anthropic:claude-sonnet-4-5",
        "content": CONTENT,
        "stop_reason": "tool_use",
    }


@pytest.mark.anyio
async def test_a_root_oneof_anthropic_refuses_is_said_in_the_description(sleeps: Sleeps) -> None:
    edge = {tool.name: tool for tool in load_tools("schema-edge-cases")}
    fake = FakeProvider(json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")))
    await model(fake, sleeps).invoke(ASK, [edge["get_issue"], edge["find"]])
    get_issue, find = fake.body()["tools"]
    assert get_issue["input_schema"] == {
        "type": "object",
        "properties": {
            "identifier": {"type": "string", "description": "Issue identifier, e.g. PROJ-12"},
            "url": {"type": "string", "format": "uri"},
        },
        "additionalProperties": False,
    }
    assert get_issue["description"].endswith(
        "\n\nArguments must match exactly one of these forms: (1) with `identifier`; (2) with `url`."
    )
    # A root anyOf of whole objects, without a type: one object, needing what both need.
    assert find["input_schema"]["type"] == "object"
    assert set(find["input_schema"]["properties"]) == {"name", "id", "limit"}
    assert find["input_schema"]["required"] == ["limit"]
    assert "anyOf" not in find["input_schema"]


@pytest.mark.anyio
async def test_thinking_blocks_and_signatures_are_replayed_exactly(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(200, message(CONTENT)),
        json_response(200, message([{"type": "text", "text": "42 and 3."}], "end_turn")),
    )
    claude = model(fake, sleeps)
    first = await claude.invoke(ASK, TOOLS)
    results = [
        ToolMessage(tool_call_id=call.id, name=call.name, content=str(i))
        for i, call in enumerate(first.tool_calls)
    ]
    second = await claude.invoke([*ASK, first, *results, UserMessage(content="Thanks")], TOOLS)

    messages = fake.body()["messages"]
    assert messages[1] == {"role": "assistant", "content": CONTENT}
    # Both results and the follow-up text form one user turn, tool results first.
    assert messages[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "0"},
            {"type": "tool_result", "tool_use_id": "toolu_01B19q90qw90lq917835lq8", "content": "1"},
            {"type": "text", "text": "Thanks"},
        ],
    }
    assert len(messages) == 3
    assert second.content == "42 and 3."


@pytest.mark.anyio
async def test_foreign_assistant_messages_are_rebuilt_from_fields(sleeps: Sleeps) -> None:
    foreign = AssistantMessage(
        content="Let me add.",
        tool_calls=(ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),),
        provider="openai",
        raw={"message": {"reasoning_content": "not for claude"}},
    )
    fake = FakeProvider(json_response(200, message([{"type": "text", "text": "3"}], "end_turn")))
    history = [*ASK, foreign, ToolMessage(tool_call_id="call_1", name="get-sum", content="3")]
    await model(fake, sleeps).invoke(history, TOOLS)
    assert fake.body()["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me add."},
            {"type": "tool_use", "id": "call_1", "name": "get-sum", "input": {"a": 1, "b": 2}},
        ],
    }


def thinking_stream() -> list[tuple[str | None, Any]]:
    start: dict[str, Any] = {
        "type": "message_start",
        "message": {
            "id": "msg_014p7gG3wDgGV9EUtLvnow3U",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 472,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
                "output_tokens": 2,
            },
        },
    }

    def delta(index: int, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_delta", {
            "type": "content_block_delta",
            "index": index,
            "delta": payload,
        }

    def block_start(index: int, block: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        return "content_block_start", {
            "type": "content_block_start",
            "index": index,
            "content_block": block,
        }

    def stop(index: int) -> tuple[str, dict[str, Any]]:
        return "content_block_stop", {"type": "content_block_stop", "index": index}

    return [
        ("message_start", start),
        block_start(0, {"type": "thinking", "thinking": "", "signature": ""}),
        delta(0, {"type": "thinking_delta", "thinking": "Two sums; "}),
        delta(0, {"type": "thinking_delta", "thinking": "call get-sum twice."}),
        delta(0, {"type": "signature_delta", "signature": THINKING["signature"]}),
        stop(0),
        block_start(1, REDACTED),
        stop(1),
        ("ping", {"type": "ping"}),
        block_start(2, {"type": "text", "text": ""}),
        delta(2, {"type": "text_delta", "text": "I'll "}),
        delta(2, {"type": "text_delta", "text": "add them."}),
        stop(2),
        block_start(3, {**TOOL_USES[0], "input": {}}),
        delta(3, {"type": "input_json_delta", "partial_json": ""}),
        delta(3, {"type": "input_json_delta", "partial_json": '{"a": 17'}),
        delta(3, {"type": "input_json_delta", "partial_json": ', "b": 25}'}),
        stop(3),
        block_start(4, {**TOOL_USES[1], "input": {}}),
        delta(4, {"type": "input_json_delta", "partial_json": '{"a": 1, "b": 2}'}),
        stop(4),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 91}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


@pytest.mark.anyio
async def test_stream_rebuilds_the_same_blocks_and_streams_only_text(sleeps: Sleeps) -> None:
    fake = FakeProvider(sse_response(thinking_stream()), json_response(200, message(CONTENT)))
    claude = model(fake, sleeps)
    tokens = Tokens()
    streamed = await claude.invoke(ASK, TOOLS, on_token=tokens)
    once = await claude.invoke(ASK, TOOLS)

    assert fake.body(0)["stream"] is True
    assert tokens.received == ["I'll ", "add them."]
    assert streamed.raw == once.raw
    assert streamed.model_dump() == once.model_dump()
    # Each is its own response (the stream's id is in `message_start`), from the snapshot
    # the `claude-sonnet-4-5` alias stood for.
    assert (streamed.response_id, streamed.response_model) == (
        "msg_014p7gG3wDgGV9EUtLvnow3U",
        "claude-sonnet-4-5-20250929",
    )
    assert (once.response_id, once.response_model) == (
        "msg_01Aq9w938a90dw8q",
        "claude-sonnet-4-5-20250929",
    )
    assert claude.server_of(once) == ServerAddress("api.anthropic.com", 443)


@pytest.mark.anyio
async def test_streamed_thinking_is_replayed_exactly(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        sse_response(thinking_stream()),
        json_response(200, message([{"type": "text", "text": "done"}], "end_turn")),
    )
    claude = model(fake, sleeps)
    first = await claude.invoke(ASK, TOOLS, on_token=Tokens())
    results = [ToolMessage(tool_call_id=c.id, name=c.name, content="x") for c in first.tool_calls]
    await claude.invoke([*ASK, first, *results], TOOLS)
    assistant = fake.body()["messages"][1]
    assert assistant["content"][0] == THINKING
    assert assistant["content"][1] == REDACTED


@pytest.mark.anyio
async def test_stream_error_event_raises(sleeps: Sleeps) -> None:
    events = [
        ("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
        (
            "error",
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        ),
    ]
    fake = FakeProvider(sse_response(events))
    with pytest.raises(ModelResponseError, match="overloaded_error: Overloaded"):
        await model(fake, sleeps).invoke(ASK, [], on_token=Tokens())


@pytest.mark.anyio
async def test_529_overloaded_is_retried(sleeps: Sleeps) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake = FakeProvider(
        json_response(529, overloaded),
        json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")),
    )
    answer = await model(fake, sleeps).invoke(ASK, [])
    assert answer.content == "ok"
    assert sleeps.delays == [0.375]


@pytest.mark.anyio
async def test_400_carries_anthropic_message(sleeps: Sleeps) -> None:
    error = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "messages.1.content.0.type: Expected `thinking` or `redacted_thinking`, but found `text`.",
        },
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    fake = FakeProvider(json_response(400, error))
    with pytest.raises(ModelHTTPError) as caught:
        await model(fake, sleeps).invoke(ASK, [])
    assert caught.value.status_code == 400
    assert caught.value.provider == "anthropic"
    assert "Expected `thinking` or `redacted_thinking`" in str(caught.value)
    assert KEY not in str(caught.value)


def as_anthropic_answers(request: httpx.Request) -> httpx.Response:
    """Anthropic's answer to a request whose messages hold tool blocks but that declares no
    tools (anthropics/anthropic-sdk-python#494), else a text answer."""
    body = json.loads(request.content)
    blocks = [b for m in body["messages"] for b in m["content"]]
    if not body.get("tools") and any(b["type"] in ("tool_use", "tool_result") for b in blocks):
        refusal = "Requests which include `tool_use` or `tool_result` blocks must define tools."
        error = {"type": "invalid_request_error", "message": refusal}
        return json_response(400, {"type": "error", "error": error})
    return json_response(
        200, message([{"type": "text", "text": "You asked for sums."}], "end_turn")
    )


@pytest.mark.anyio
async def test_a_turn_that_offers_no_tools_after_calls_is_taken(sleeps: Sleeps) -> None:
    """Its servers down, or a tool-less agent on a session that used tools: the history's
    calls go back as they were, their tools declared again and none callable."""
    fake = FakeProvider(
        json_response(200, message(CONTENT)), as_anthropic_answers, as_anthropic_answers
    )
    claude = model(fake, sleeps)
    first = await claude.invoke(ASK, TOOLS)
    results = [ToolMessage(tool_call_id=c.id, name=c.name, content="42") for c in first.tool_calls]
    done = AssistantMessage(content="42 and 3.")
    later = [*ASK, first, *results, done, UserMessage(content="What did I ask?")]
    answer = await claude.invoke(later, [])
    assert answer.content == "You asked for sums."
    body = fake.body()
    assert body["messages"][1] == {"role": "assistant", "content": CONTENT}  # signatures kept
    assert body["tools"] == [
        {
            "name": "get-sum",
            "description": "Called earlier in this conversation; not available now.",
            "input_schema": {"type": "object"},
        }
    ]
    assert body["tool_choice"] == {"type": "none"}
    # A conversation without calls is sent without tools, as before.
    await claude.invoke([*ASK, done, *ASK[1:]], [])
    assert "tools" not in fake.body()
    assert "tool_choice" not in fake.body()


def test_key_is_required_and_hidden() -> None:
    with pytest.raises(ModelConfigError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5", api_key="")
    claude = AnthropicModel("claude-sonnet-4-5", api_key=KEY)
    assert KEY not in repr(claude)
    assert KEY not in repr(vars(claude))


@pytest.mark.anyio
async def test_an_empty_tool_result_is_sent_without_content(sleeps: Sleeps) -> None:
    call = ToolCall(id="toolu_9", name="get-env", arguments={})
    history = [
        *ASK,
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(tool_call_id="toolu_9", name="get-env", content=""),
    ]
    fake = FakeProvider(json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")))
    await model(fake, sleeps).invoke(history, TOOLS)
    assert fake.body()["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_9"}],
    }


@pytest.mark.anyio
async def test_a_failed_calls_result_is_marked_is_error(sleeps: Sleeps) -> None:
    calls = tuple(ToolCall(id=f"toolu_{i}", name="get-sum", arguments={}) for i in range(2))
    history = [
        *ASK,
        AssistantMessage(tool_calls=calls),
        ToolMessage(tool_call_id="toolu_0", name="get-sum", content="3"),
        ToolMessage(tool_call_id="toolu_1", name="get-sum", content="Error: no", is_error=True),
    ]
    fake = FakeProvider(json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")))
    await model(fake, sleeps).invoke(history, TOOLS)
    assert fake.body()["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_0", "content": "3"},
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "Error: no", "is_error": True},
    ]


@pytest.mark.anyio
async def test_a_key_echoed_in_a_200_body_or_a_stream_error_is_scrubbed(sleeps: Sleeps) -> None:
    error = {"type": "authentication_error", "message": f"invalid x-api-key {KEY}"}
    fake = FakeProvider(
        json_response(200, {"type": "error", "error": error}),
        sse_response([("error", {"type": "error", "error": error})]),
    )
    claude = model(fake, sleeps)
    for on_token in (None, Tokens()):
        with pytest.raises(ModelResponseError) as caught:
            await claude.invoke(ASK, [], on_token=on_token)
        assert KEY not in str(caught.value)
        assert "invalid x-api-key ***" in str(caught.value)


def tool_use_stream(
    *inputs: str, stop_reason: str | None = "tool_use", ended: bool = True
) -> list[tuple[str | None, Any]]:
    """A streamed answer with one `get-sum` call per text in `inputs`, each sent as the call's
    whole `partial_json`."""
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [], "stop_reason": None, "usage": {"input_tokens": 40, "output_tokens": 1},
        }}),
    ]  # fmt: skip
    for index, source in enumerate(inputs):
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": f"toolu_0{index}",
            "name": "get-sum",
            "input": {},
        }
        json_delta = {"type": "input_json_delta", "partial_json": source}
        events += [
            ("content_block_start", {"type": "content_block_start", "index": index,
                                     "content_block": block}),
            ("content_block_delta", {"type": "content_block_delta", "index": index,
                                     "delta": json_delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": index}),
        ]  # fmt: skip
    if stop_reason is not None:
        events.append(
            ("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop_reason, "stop_sequence": None},
                               "usage": {"output_tokens": 30}})
        )  # fmt: skip
    if ended:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


@pytest.mark.anyio
async def test_a_call_whose_input_is_not_an_object_is_replayed_with_an_empty_object(
    sleeps: Sleeps,
) -> None:
    # The Messages API answers 400 to a `tool_use.input` that is not an object.
    fake = FakeProvider(
        sse_response(tool_use_stream('{"a": 1, "b": 1+', "[1, 2]", '{"a": 1, "b": 2}')),
        json_response(200, message([{"type": "text", "text": "ok"}], "end_turn")),
    )
    claude = model(fake, sleeps)
    first = await claude.invoke(ASK, [GET_SUM], on_token=Tokens())
    assert [c.invalid_arguments for c in first.tool_calls] == ['{"a": 1, "b": 1+', "[1, 2]", None]
    results = [ToolMessage(tool_call_id=c.id, name=c.name, content="x") for c in first.tool_calls]
    await claude.invoke([*ASK, first, *results], [GET_SUM])
    replayed = fake.body()["messages"][1]["content"]
    assert [block["input"] for block in replayed] == [{}, {}, {"a": 1, "b": 2}]
    assert [block["id"] for block in replayed] == ["toolu_00", "toolu_01", "toolu_02"]


def with_empty_text(events: list[tuple[str | None, Any]]) -> list[tuple[str | None, Any]]:
    """`events` with a text block Claude opened and sent no text in, before its `tool_use`s
    (indices moved up by one), as it sometimes streams."""
    empty = {"type": "text", "text": ""}
    moved: list[tuple[str | None, Any]] = []
    for name, data in events:
        if "index" in data:
            data = {**data, "index": data["index"] + 1}
        moved.append((name, data))
    opened = [
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": empty}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
    ]  # fmt: skip
    return [moved[0], *opened, *moved[1:]]


@pytest.mark.anyio
async def test_an_empty_text_block_is_not_sent_back(sleeps: Sleeps) -> None:
    """The API refuses an empty text block ("text content blocks must be non-empty"): one
    Claude streamed is not kept, and one a stored run holds is not replayed; an empty one
    with citations is not empty."""
    fake = FakeProvider(
        sse_response(with_empty_text(tool_use_stream('{"a": 1, "b": 2}'))),
        json_response(200, message([{"type": "text", "text": "3"}], "end_turn")),
        json_response(200, message([{"type": "text", "text": "3"}], "end_turn")),
    )
    claude = model(fake, sleeps)
    streamed = await claude.invoke(ASK, [GET_SUM], on_token=Tokens())
    use = {"type": "tool_use", "id": "toolu_00", "name": "get-sum", "input": {"a": 1, "b": 2}}
    assert raw_of(streamed)["content"] == [use]
    result = ToolMessage(tool_call_id="toolu_00", name="get-sum", content="3")
    await claude.invoke([*ASK, streamed, result], [GET_SUM])
    assert fake.body()["messages"][1] == {"role": "assistant", "content": [use]}

    cited = {
        "type": "text",
        "text": "",
        "citations": [{"type": "char_location", "cited_text": "3"}],
    }
    stored = streamed.model_copy(
        update={"raw": {**raw_of(streamed), "content": [{"type": "text", "text": ""}, cited, use]}}
    )
    await claude.invoke([*ASK, stored, result], [GET_SUM])
    assert fake.body()["messages"][1] == {"role": "assistant", "content": [cited, use]}


@pytest.mark.anyio
async def test_a_call_input_nested_deeper_than_python_reads_is_invalid_arguments(
    sleeps: Sleeps,
) -> None:
    deep = '{"a": ' + "[" * 3_000
    fake = FakeProvider(sse_response(tool_use_stream(deep)))
    answer = await model(fake, sleeps).invoke(ASK, [GET_SUM], on_token=Tokens())
    assert [c.invalid_arguments for c in answer.tool_calls] == [deep]


@pytest.mark.parametrize(
    "events",
    [
        tool_use_stream('{"a": 1, "b": 2}', '{"a": 3', stop_reason=None, ended=False),
        thinking_stream()[:12],
    ],
    ids=["calls", "text"],
)
@pytest.mark.anyio
async def test_a_stream_that_stops_before_message_stop_is_not_an_answer(
    sleeps: Sleeps, events: list[tuple[str | None, Any]]
) -> None:
    fake = FakeProvider(sse_response(events))
    with pytest.raises(ModelConnectionError, match="stream ended before the answer was complete"):
        await model(fake, sleeps).invoke(ASK, [GET_SUM], on_token=Tokens())


@pytest.mark.anyio
async def test_a_whole_json_answer_to_a_streaming_request_is_read(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, message(CONTENT)))
    tokens = Tokens()
    answer = await model(fake, sleeps).invoke(ASK, TOOLS, on_token=tokens)
    assert fake.body()["stream"] is True
    assert answer.content == "I'll add them."
    assert len(answer.tool_calls) == 2
    assert tokens.received == ["I'll add them."]


@pytest.mark.parametrize(
    ("provider_reason", "stop_reason"),
    [
        ("end_turn", "end"),
        ("stop_sequence", "end"),
        ("tool_use", "tool_calls"),
        ("max_tokens", "max_tokens"),
        ("refusal", "refusal"),
        ("pause_turn", "other"),
    ],
)
@pytest.mark.anyio
async def test_why_the_answer_stopped_is_kept(
    sleeps: Sleeps, provider_reason: str, stop_reason: str
) -> None:
    fake = FakeProvider(
        json_response(200, message([TOOL_USES[0]], provider_reason)),
        sse_response(tool_use_stream('{"a": 17, "b": 25}', stop_reason=provider_reason)),
    )
    claude = model(fake, sleeps)
    for answer in (
        await claude.invoke(ASK, TOOLS),
        await claude.invoke(ASK, TOOLS, on_token=Tokens()),
    ):
        assert (answer.stop_reason, answer.stop_detail) == (stop_reason, provider_reason)
