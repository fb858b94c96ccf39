"""The OpenAI and OpenAI-compatible providers against real-format chat completions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent.errors import ModelConnectionError, ModelHTTPError, ModelResponseError
from agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agent.model import ServerAddress
from agent.models import ModelSettings, OpenAICompatibleModel, OpenAIModel, answer_token_limit

from .conftest import load_tools
from .support import (
    FakeProvider,
    Sleeps,
    Tokens,
    json_response,
    raw_of,
    retry_policy,
    sse_response,
)

KEY = "sk-test-4f1c2d9e8b7a6c5d"
GET_SUM = next(t for t in load_tools("server-everything") if t.name == "get-sum")
READ_FILE = next(t for t in load_tools("server-filesystem") if t.name == "read_text_file")
ASK = [SystemMessage(content="Be brief."), UserMessage(content="What is 17 + 25?")]


def completion(
    message: dict[str, Any], finish_reason: str = "stop", **usage: Any
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-BkDU2",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
        ],
        "usage": {
            "prompt_tokens": 82,
            "completion_tokens": 17,
            "total_tokens": 99,
            "prompt_tokens_details": {"cached_tokens": 64, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 5, "audio_tokens": 0},
            **usage,
        },
        "service_tier": "default",
        "system_fingerprint": "fp_38343a2f8f",
    }


def call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-BkDU3",
        "object": "chat.completion.chunk",
        "created": 1750000000,
        "model": "gpt-4.1-mini-2025-04-14",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        "usage": None,
    }


USAGE_CHUNK: dict[str, Any] = {
    "id": "chatcmpl-BkDU3",
    "object": "chat.completion.chunk",
    "created": 1750000000,
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [],
    "usage": {
        "prompt_tokens": 82,
        "completion_tokens": 17,
        "total_tokens": 99,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 5},
    },
}


def openai(fake: FakeProvider, sleeps: Sleeps, **kwargs: Any) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini", api_key=KEY, http_client=fake.client(), retry=retry_policy(sleeps), **kwargs
    )


def compatible(fake: FakeProvider, sleeps: Sleeps, **kwargs: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1",
        "qwen2.5",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
        **kwargs,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("own", "sent"), [(None, 300), (64, 64)])
async def test_an_answer_token_limit_caps_max_completion_tokens(
    sleeps: Sleeps, own: int | None, sent: int
) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "42", "refusal": None}
    fake = FakeProvider(json_response(200, completion(message)))
    with answer_token_limit(300):
        await openai(fake, sleeps, settings=ModelSettings(max_tokens=own)).invoke(ASK, [])
    assert fake.body()["max_completion_tokens"] == sent


@pytest.mark.anyio
async def test_text_answer_maps_request_usage_and_raw(sleeps: Sleeps) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "42", "refusal": None}
    fake = FakeProvider(json_response(200, completion(message)))
    model = openai(fake, sleeps, settings=ModelSettings(max_tokens=64, temperature=0))

    answer = await model.invoke(ASK, [GET_SUM])

    request = fake.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = fake.body()
    assert body["model"] == "gpt-4.1-mini"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 17 + 25?"},
    ]
    assert body["max_completion_tokens"] == 64
    assert body["temperature"] == 0
    assert "stream" not in body
    function = body["tools"][0]["function"]
    assert function["name"] == "get-sum"
    assert function["strict"] is True
    assert function["parameters"]["additionalProperties"] is False
    assert "$schema" in GET_SUM.input_schema
    assert "$schema" not in function["parameters"]
    assert answer.content == "42"
    assert answer.tool_calls == ()
    assert answer.usage == Usage(
        input_tokens=82, output_tokens=17, cached_tokens=64, reasoning_tokens=5, requests=1
    )
    assert answer.provider == "openai"
    assert answer.raw == {
        "model": "openai:gpt-4.1-mini",
        "message": message,
        "finish_reason": "stop",
    }


@pytest.mark.anyio
async def test_optional_parameters_are_sent_without_strict(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    await openai(fake, sleeps).invoke(ASK, [READ_FILE])
    function = fake.body()["tools"][0]["function"]
    assert "strict" not in function
    assert function["parameters"]["required"] == ["path"]


@pytest.mark.anyio
async def test_schemas_openai_refuses_as_written_are_sent_as_it_takes_them(
    sleeps: Sleeps,
) -> None:
    edge = {tool.name: tool for tool in load_tools("schema-edge-cases")}
    tools = [edge["get_issue"], edge["bulk_update"], edge["plot"]]
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    await openai(fake, sleeps).invoke(ASK, tools)
    get_issue, bulk_update, plot = (tool["function"] for tool in fake.body()["tools"])
    # The root's oneOf (refused at the top level) is said in the description instead.
    assert get_issue["parameters"] == {
        "type": "object",
        "properties": {
            "identifier": {"type": "string", "description": "Issue identifier, e.g. PROJ-12"},
            "url": {"type": "string", "format": "uri"},
        },
        "additionalProperties": False,
    }
    assert get_issue["description"] == (
        "Get an issue by its identifier or its URL.\n\n"
        "Arguments must match exactly one of these forms: (1) with `identifier`; (2) with `url`."
    )
    # Arrays are refused without items: any item, as the schema allowed.
    assert bulk_update["parameters"]["properties"]["ids"] == {"type": "array", "items": {}}
    assert plot["parameters"]["properties"]["point"]["items"] == {}  # a pydantic tuple


@pytest.mark.anyio
async def test_parallel_tool_calls_and_invalid_arguments(sleeps: Sleeps) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("call_1", "get-sum", '{"a": 1, "b": 2}'),
            call("call_2", "get-sum", '{"a": 3, "b": 4}'),
            call("call_3", "get-sum", '{"a": 3, "b": '),
            call("call_4", "get-sum", "[1, 2]"),
        ],
    }
    fake = FakeProvider(json_response(200, completion(message, "tool_calls")))
    answer = await openai(fake, sleeps).invoke(ASK, [GET_SUM])
    assert answer.content == ""
    assert answer.tool_calls == (
        ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),
        ToolCall(id="call_2", name="get-sum", arguments={"a": 3, "b": 4}),
        ToolCall(id="call_3", name="get-sum", invalid_arguments='{"a": 3, "b": '),
        ToolCall(id="call_4", name="get-sum", invalid_arguments="[1, 2]"),
    )


def tool_call_stream() -> list[tuple[str | None, Any]]:
    return [
        (None, chunk({"role": "assistant", "content": "", "refusal": None})),
        (None, chunk({"content": "Adding "})),
        (None, chunk({"content": "both."})),
        (None, chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "get-sum", "arguments": ""}}]})),
        (None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"a": 1,'}}]})),
        (None, chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                      "function": {"name": "get-sum", "arguments": '{"a"'}}]})),
        (None, chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "b": 2}'}}]})),
        (None, chunk({"tool_calls": [{"index": 1, "function": {"arguments": ': 3, "b": 4}'}}]})),
        (None, chunk({}, "tool_calls")),
        (None, USAGE_CHUNK),
        (None, "[DONE]"),
    ]  # fmt: skip


@pytest.mark.anyio
async def test_stream_assembles_text_parallel_calls_and_usage(sleeps: Sleeps) -> None:
    fake = FakeProvider(sse_response(tool_call_stream()))
    tokens = Tokens()

    answer = await openai(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)

    body = fake.body()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert tokens.received == ["Adding ", "both."]
    assert answer.content == "Adding both."
    assert answer.tool_calls == (
        ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),
        ToolCall(id="call_2", name="get-sum", arguments={"a": 3, "b": 4}),
    )
    assert answer.usage.input_tokens == 82
    assert answer.usage.reasoning_tokens == 5


@pytest.mark.anyio
async def test_stream_and_whole_answer_give_the_same_message(sleeps: Sleeps) -> None:
    whole = completion(
        {
            "role": "assistant",
            "content": "Adding both.",
            "tool_calls": [
                call("call_1", "get-sum", '{"a": 1, "b": 2}'),
                call("call_2", "get-sum", '{"a": 3, "b": 4}'),
            ],
        },
        "tool_calls",
    )
    fake = FakeProvider(json_response(200, whole), sse_response(tool_call_stream()))
    model = openai(fake, sleeps)
    once = await model.invoke(ASK, [GET_SUM])
    streamed = await model.invoke(ASK, [GET_SUM], on_token=Tokens())
    assert streamed.model_dump(exclude={"raw"}) == once.model_dump(exclude={"raw"})
    assert raw_of(streamed)["message"]["tool_calls"] == raw_of(once)["message"]["tool_calls"]


@pytest.mark.anyio
async def test_an_answer_names_its_response_the_model_that_wrote_it_and_its_server(
    sleeps: Sleeps,
) -> None:
    message: dict[str, Any] = {"role": "assistant", "content": "42", "refusal": None}
    fake = FakeProvider(json_response(200, completion(message)), sse_response(tool_call_stream()))
    model = openai(fake, sleeps)
    once = await model.invoke(ASK, [GET_SUM])
    streamed = await model.invoke(ASK, [GET_SUM], on_token=Tokens())

    # `gpt-4.1-mini` was asked; the snapshot that answered is named in the completion.
    assert (once.response_id, once.response_model) == ("chatcmpl-BkDU2", "gpt-4.1-mini-2025-04-14")
    assert (streamed.response_id, streamed.response_model) == (
        "chatcmpl-BkDU3",
        "gpt-4.1-mini-2025-04-14",
    )
    assert model.server_of(once) == model.server_of(None) == ServerAddress("api.openai.com", 443)
    # Telemetry only: what a run or a chat memory stores of the message is as before.
    assert "chatcmpl" not in once.model_dump_json() + streamed.model_dump_json()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("base_url", "server"),
    [
        ("http://127.0.0.1:8080/v1", ServerAddress("127.0.0.1", 8080)),
        ("http://[::1]:11434/v1", ServerAddress("::1", 11434)),
        ("http://ollama.lan/v1", ServerAddress("ollama.lan", 80)),
        (
            "https://bob:s3cret@llm.example.com/openai/v1?api-version=2024-10-21",
            ServerAddress("llm.example.com", 443),
        ),
    ],
)
async def test_a_compatible_servers_address_is_its_host_and_port_alone(
    sleeps: Sleeps, base_url: str, server: ServerAddress
) -> None:
    # Ollama's answer: its own id, and the model under the tag it was pulled as.
    ollama = completion({"role": "assistant", "content": "42"})
    ollama |= {"id": "chatcmpl-297", "model": "qwen2.5:7b", "system_fingerprint": "fp_ollama"}
    fake = FakeProvider(json_response(200, ollama))
    model = OpenAICompatibleModel(
        base_url, "qwen2.5", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    answer = await model.invoke(ASK, [])
    assert (answer.response_id, answer.response_model) == ("chatcmpl-297", "qwen2.5:7b")
    assert model.server_of(answer) == server


@pytest.mark.anyio
async def test_a_server_that_names_no_response_leaves_it_unknown(sleeps: Sleeps) -> None:
    bare = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "42"}}]}
    stream = [(None, {"choices": [{"index": 0, "delta": {"content": "42"}}]}), (None, "[DONE]")]
    fake = FakeProvider(json_response(200, bare), sse_response(stream))
    model = compatible(fake, sleeps)
    for answer in [await model.invoke(ASK, []), await model.invoke(ASK, [], on_token=Tokens())]:
        assert answer.content == "42"
        assert (answer.response_id, answer.response_model) == (None, None)


@pytest.mark.anyio
async def test_stream_setting_forces_streaming_without_a_callback(sleeps: Sleeps) -> None:
    fake = FakeProvider(sse_response(tool_call_stream()))
    model = openai(fake, sleeps, settings=ModelSettings(stream=True))
    answer = await model.invoke(ASK, [GET_SUM])
    assert fake.body()["stream"] is True
    assert len(answer.tool_calls) == 2


@pytest.mark.anyio
async def test_stream_error_event_raises(sleeps: Sleeps) -> None:
    events = [
        (None, chunk({"content": "Hel"})),
        (None, {"error": {"message": "The server had an error", "type": "server_error"}}),
    ]
    fake = FakeProvider(sse_response(events))
    with pytest.raises(ModelResponseError, match="The server had an error"):
        await openai(fake, sleeps).invoke(ASK, [], on_token=Tokens())


HISTORY_CALL = ToolCall(id="call_9", name="get-sum", arguments={"a": 17, "b": 25})


@pytest.mark.parametrize(
    ("factory", "content"), [(openai, None), (compatible, "")], ids=["openai", "compatible"]
)
@pytest.mark.anyio
async def test_assistant_tool_calls_and_results_are_sent_back(
    sleeps: Sleeps, factory: Any, content: str | None
) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "42"})))
    history = [
        *ASK,
        AssistantMessage(tool_calls=(HISTORY_CALL,)),
        ToolMessage(tool_call_id="call_9", name="get-sum", content="42"),
    ]
    await factory(fake, sleeps).invoke(history, [GET_SUM])
    messages = fake.body()["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": content,
        "tool_calls": [call("call_9", "get-sum", '{"a": 17, "b": 25}')],
    }
    assert messages[3] == {"role": "tool", "tool_call_id": "call_9", "content": "42"}


@pytest.mark.anyio
async def test_a_lone_surrogate_in_a_tool_result_is_sent_as_u_fffd(sleeps: Sleeps) -> None:
    # What a JavaScript server sends when it cuts a string in the middle of an emoji: JSON's
    # "\ud800", which Python reads as a string UTF-8 cannot encode.
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "42"})))
    history = [
        *ASK,
        AssistantMessage(tool_calls=(HISTORY_CALL,)),
        ToolMessage(tool_call_id="call_9", name="get-sum", content="bad\ud800x \U0001f600"),
    ]
    answer = await openai(fake, sleeps).invoke(history, [GET_SUM])
    assert answer.content == "42"
    request = fake.requests[-1]
    assert request.headers["content-type"] == "application/json"
    assert json.loads(request.content)["messages"][3]["content"] == "bad\ufffdx \U0001f600"


@pytest.mark.anyio
async def test_reasoning_content_round_trips_to_the_same_server(sleeps: Sleeps) -> None:
    first = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The user wants a sum; call get-sum.",
        "tool_calls": [call("call_0", "get-sum", '{"a": 17, "b": 25}')],
    }
    fake = FakeProvider(
        json_response(200, completion(first, "tool_calls")),
        json_response(200, completion({"role": "assistant", "content": "42"})),
    )
    model = compatible(fake, sleeps)
    answer = await model.invoke(ASK, [GET_SUM])
    assert answer.provider == "openai-compatible:http://127.0.0.1:8080/v1"

    result = ToolMessage(tool_call_id="call_0", name="get-sum", content="42")
    await model.invoke([*ASK, answer, result], [GET_SUM])

    sent = fake.body()["messages"][2]
    assert sent["reasoning_content"] == "The user wants a sum; call get-sum."
    assert sent["content"] == ""


@pytest.mark.anyio
async def test_reasoning_is_not_replayed_to_another_server(sleeps: Sleeps) -> None:
    foreign = AssistantMessage(
        content="hi",
        provider="openai-compatible:https://api.deepseek.com/v1",
        raw={"message": {"reasoning_content": "secret chain"}},
    )
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    await compatible(fake, sleeps).invoke([*ASK, foreign, UserMessage(content="go on")], [])
    assert fake.body()["messages"][2] == {"role": "assistant", "content": "hi"}


FENCED = (
    '```json\n{\n  "name": "get-sum",\n  "arguments": {\n    "a": 17,\n    "b": 25\n  }\n}\n```'
)


@pytest.mark.anyio
async def test_compatible_server_text_tool_calls_become_calls(sleeps: Sleeps) -> None:
    # What llama.cpp's server returned for Qwen2.5-Coder-1.5B with tool_choice auto.
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": FENCED})))
    answer = await compatible(fake, sleeps).invoke(ASK, [GET_SUM])
    assert answer.content == ""
    assert len(answer.tool_calls) == 1
    assert answer.tool_calls[0].name == "get-sum"
    assert answer.tool_calls[0].arguments == {"a": 17, "b": 25}
    assert answer.tool_calls[0].id.startswith("call_")
    assert fake.body()["tools"][0]["function"].get("strict") is None
    assert "max_completion_tokens" not in fake.body()


@pytest.mark.anyio
async def test_official_openai_leaves_text_tool_calls_as_text(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": FENCED})))
    answer = await openai(fake, sleeps).invoke(ASK, [GET_SUM])
    assert answer.content == FENCED
    assert answer.tool_calls == ()


@pytest.mark.anyio
async def test_429_waits_for_retry_after_then_succeeds(sleeps: Sleeps) -> None:
    rate_limited = json_response(
        429,
        {
            "error": {
                "message": "Rate limit reached",
                "type": "requests",
                "code": "rate_limit_exceeded",
            }
        },
        headers={"retry-after": "2"},
    )
    fake = FakeProvider(
        rate_limited, json_response(200, completion({"role": "assistant", "content": "42"}))
    )
    answer = await openai(fake, sleeps).invoke(ASK, [])
    assert answer.content == "42"
    assert len(fake.requests) == 2
    assert sleeps.delays == [2.0]


@pytest.mark.anyio
async def test_5xx_and_connection_errors_back_off_exponentially(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(503, {"error": {"message": "overloaded"}}),
        httpx.ConnectError("connection refused"),
        json_response(500, {"error": {"message": "oops"}}),
        json_response(200, completion({"role": "assistant", "content": "42"})),
    )
    answer = await openai(fake, sleeps).invoke(ASK, [])
    assert answer.content == "42"
    # initial 0.5 s doubling, "equal jitter" with random() = 0.5 → 3/4 of each step
    assert sleeps.delays == [0.375, 0.75, 1.5]


@pytest.mark.anyio
async def test_retries_are_bounded(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        *(json_response(502, {"error": {"message": "bad gateway"}}) for _ in range(4))
    )
    with pytest.raises(ModelHTTPError) as caught:
        await openai(fake, sleeps).invoke(ASK, [])
    assert caught.value.status_code == 502
    assert len(fake.requests) == 4
    assert len(sleeps.delays) == 3


@pytest.mark.anyio
async def test_connection_failures_end_in_connection_error(sleeps: Sleeps) -> None:
    fake = FakeProvider(*(httpx.ConnectError("connection refused") for _ in range(4)))
    with pytest.raises(ModelConnectionError, match=r"cannot reach https://api\.openai\.com/v1"):
        await openai(fake, sleeps).invoke(ASK, [])
    assert len(fake.requests) == 4


@pytest.mark.anyio
async def test_400_reports_the_provider_message_without_the_key(sleeps: Sleeps) -> None:
    body = {
        "error": {
            "message": f"Invalid schema for function 'get-sum' (key {KEY[:3]}...{KEY[-4:]})",
            "type": "invalid_request_error",
            "param": "tools[0].function.parameters",
            "code": "invalid_function_parameters",
        }
    }
    fake = FakeProvider(json_response(400, body))
    with pytest.raises(ModelHTTPError) as caught:
        await openai(fake, sleeps).invoke(ASK, [GET_SUM])
    error = caught.value
    assert error.status_code == 400
    assert error.provider == "openai"
    assert error.provider_message is not None
    assert error.provider_message.startswith("Invalid schema for function 'get-sum'")
    assert "HTTP 400" in str(error)
    assert "openai:gpt-4.1-mini" in str(error)
    assert KEY not in str(error)
    assert len(fake.requests) == 1  # a 400 is not retried
    assert sleeps.delays == []


@pytest.mark.anyio
async def test_a_key_echoed_by_the_server_is_scrubbed(sleeps: Sleeps) -> None:
    body = {"error": {"message": f"Incorrect API key provided: {KEY}.", "code": "invalid_api_key"}}
    fake = FakeProvider(json_response(401, body))
    with pytest.raises(ModelHTTPError) as caught:
        await openai(fake, sleeps).invoke(ASK, [])
    assert KEY not in str(caught.value)
    assert "Incorrect API key provided: ***." in str(caught.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("dummy", "word"),
    [
        ("x", "Expected"),
        ("k", "mock"),
        ("none", "nonempty"),
        ("EMPTY", "NONEMPTY"),
        ("ollama", "ollama_chat"),
    ],
)
async def test_a_short_dummy_key_leaves_the_providers_words_readable(
    sleeps: Sleeps, dummy: str, word: str
) -> None:
    """A local server's dummy key is masked where it is said alone, not inside words."""
    said = (
        "Invalid 'messages[0].content': string too long. Expected a string with maximum length"
        f" 10485760, but got a string with length 10485761 instead ({word}; mock key {dummy})."
    )
    fake = FakeProvider(json_response(400, {"error": {"message": said}}))
    with pytest.raises(ModelHTTPError) as caught:
        await compatible(fake, sleeps, api_key=dummy).invoke(ASK, [])
    assert fake.requests[0].headers["authorization"] == f"Bearer {dummy}"
    assert str(caught.value) == (
        "openai-compatible:http://127.0.0.1:8080/v1#qwen2.5: HTTP 400: "
        + said.replace(f"key {dummy})", "key ***)")
    )


def test_repr_and_name_hide_the_key() -> None:
    model = OpenAIModel("gpt-4.1-mini", api_key=KEY)
    assert KEY not in repr(model)
    assert KEY not in model.name
    assert KEY not in repr(vars(model))
    compat = OpenAICompatibleModel("http://user:pw@127.0.0.1:8080/v1?token=t", "m", api_key=KEY)
    assert compat.name == "openai-compatible:http://127.0.0.1:8080/v1#m"
    assert "pw" not in repr(compat)


@pytest.mark.anyio
async def test_extra_body_and_compatible_key_are_sent(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    model = compatible(
        fake,
        sleeps,
        api_key="local-key",
        settings=ModelSettings(max_tokens=32, extra_body={"top_k": 20}),
    )
    await model.invoke(ASK, [])
    assert fake.requests[0].headers["authorization"] == "Bearer local-key"
    assert str(fake.requests[0].url) == "http://127.0.0.1:8080/v1/chat/completions"
    body = fake.body()
    assert body["top_k"] == 20
    assert body["max_tokens"] == 32


@pytest.mark.anyio
async def test_keyless_compatible_server_gets_no_auth_header(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    await compatible(fake, sleeps).invoke(ASK, [])
    assert "authorization" not in fake.requests[0].headers


@pytest.mark.anyio
async def test_an_answer_without_choices_is_an_error(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, {"object": "chat.completion", "choices": []}))
    with pytest.raises(ModelResponseError, match="no choices"):
        await openai(fake, sleeps).invoke(ASK, [])


@pytest.mark.anyio
async def test_non_json_answer_is_an_error(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        httpx.Response(200, text="{not json"), httpx.Response(200, text="<html>proxy</html>")
    )
    with pytest.raises(ModelResponseError, match="not JSON"):
        await openai(fake, sleeps).invoke(ASK, [])
    # A page (a proxy's, whatever its type says) is not the model's: the connection failed.
    with pytest.raises(ModelConnectionError, match="with text/plain, not JSON: proxy"):
        await openai(fake, sleeps).invoke(ASK, [])


@pytest.mark.anyio
async def test_a_stream_that_breaks_is_a_connection_error_and_not_retried(sleeps: Sleeps) -> None:
    async def broken() -> AsyncIterator[bytes]:
        yield b'data: {"choices": [{"index": 0, "delta": {"content": "Hel"}}]}\n\n'
        raise httpx.ReadError("connection reset by peer")

    fake = FakeProvider(httpx.Response(200, content=broken()))
    tokens = Tokens()
    with pytest.raises(ModelConnectionError, match="stream broke: ReadError"):
        await openai(fake, sleeps).invoke(ASK, [], on_token=tokens)
    assert tokens.received == ["Hel"]
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_streaming_can_be_turned_off_despite_a_callback(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "42"})))
    tokens = Tokens()
    model = openai(fake, sleeps, settings=ModelSettings(stream=False))
    answer = await model.invoke(ASK, [], on_token=tokens)
    assert "stream" not in fake.body()
    assert answer.content == "42"
    assert tokens.received == []


@pytest.mark.parametrize(
    ("factory", "sent"),
    [(openai, '{"a": 3, "b": '), (compatible, "{}")],
    ids=["openai-keeps-the-text", "compatible-sends-an-empty-object"],
)
@pytest.mark.anyio
async def test_invalid_arguments_in_history(sleeps: Sleeps, factory: Any, sent: str) -> None:
    # llama.cpp's server answers 500 "Failed to parse tool call arguments as JSON" otherwise.
    broken = ToolCall(id="call_5", name="get-sum", invalid_arguments='{"a": 3, "b": ')
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": "ok"})))
    history = [
        *ASK,
        AssistantMessage(tool_calls=(broken,)),
        ToolMessage(tool_call_id="call_5", name="get-sum", content="error: not JSON"),
    ]
    await factory(fake, sleeps).invoke(history, [GET_SUM])
    assert fake.body()["messages"][2]["tool_calls"][0]["function"]["arguments"] == sent


@pytest.mark.anyio
async def test_a_key_echoed_in_a_200_body_or_a_stream_error_is_scrubbed(sleeps: Sleeps) -> None:
    echoed = {"error": {"message": f"Incorrect API key provided: {KEY}.", "type": "auth"}}
    fake = FakeProvider(
        json_response(200, echoed),
        sse_response([(None, chunk({"content": "Hel"})), (None, echoed)]),
    )
    model = openai(fake, sleeps)
    for on_token in (None, Tokens()):
        with pytest.raises(ModelResponseError) as caught:
            await model.invoke(ASK, [], on_token=on_token)
        assert KEY not in str(caught.value)
        assert "Incorrect API key provided: ***." in str(caught.value)


THREE_CALLS_CUT_SHORT = [
    (None, chunk({"role": "assistant", "content": None})),
    (None, chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                  "function": {"name": "get-sum", "arguments": '{"a": 1, "b": 2}'}}]})),
    (None, chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                  "function": {"name": "get-sum", "arguments": '{"a": 3'}}]})),
]  # fmt: skip


@pytest.mark.parametrize(
    "events",
    [
        [(None, chunk({"role": "assistant", "content": "The answer "})), (None, chunk({"content": "is"}))],
        THREE_CALLS_CUT_SHORT,
        [],
    ],
    ids=["text", "parallel-calls", "nothing"],
)  # fmt: skip
@pytest.mark.anyio
async def test_a_stream_that_stops_before_its_end_is_not_an_answer(
    sleeps: Sleeps, events: list[tuple[str | None, Any]]
) -> None:
    # Cleanly closed, but without a finish_reason or `[DONE]`: a broken answer, as when the
    # connection drops (so a FallbackModel moves on, and a stopped run can resume).
    fake = FakeProvider(sse_response(events))
    with pytest.raises(ModelConnectionError, match="stream ended before the answer was complete"):
        await openai(fake, sleeps).invoke(ASK, [GET_SUM], on_token=Tokens())
    assert len(fake.requests) == 1


@pytest.mark.anyio
async def test_a_finish_reason_ends_a_stream_without_done(sleeps: Sleeps) -> None:
    events = [(None, chunk({"content": "42"})), (None, chunk({}, "stop"))]
    fake = FakeProvider(sse_response(events))
    answer = await compatible(fake, sleeps).invoke(ASK, [], on_token=Tokens())
    assert answer.content == "42"


@pytest.mark.parametrize("factory", [openai, compatible], ids=["openai", "compatible"])
@pytest.mark.anyio
async def test_a_whole_json_answer_to_a_streaming_request_is_read(
    sleeps: Sleeps, factory: Any
) -> None:
    # Some OpenAI-compatible servers ignore `stream: true` and send the whole completion.
    message = {
        "role": "assistant",
        "content": "Adding.",
        "tool_calls": [call("call_1", "get-sum", '{"a": 1, "b": 2}')],
    }
    fake = FakeProvider(json_response(200, completion(message, "tool_calls")))
    tokens = Tokens()
    answer = await factory(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)
    assert fake.body()["stream"] is True
    assert answer.content == "Adding."
    assert answer.tool_calls == (ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),)
    assert answer.usage.input_tokens == 82
    assert tokens.received == ["Adding."]  # a listener still sees the text


@pytest.mark.anyio
async def test_a_json_error_or_unreadable_json_answer_to_a_streaming_request(
    sleeps: Sleeps,
) -> None:
    error = {"error": {"message": "model 'qwen2.5' not loaded", "type": "invalid_request"}}
    broken = httpx.Response(200, headers={"content-type": "application/json"}, text="{oops")
    fake = FakeProvider(json_response(200, error), broken)
    model = compatible(fake, sleeps)
    with pytest.raises(ModelResponseError, match=r"model 'qwen2\.5' not loaded"):
        await model.invoke(ASK, [], on_token=Tokens())
    with pytest.raises(ModelResponseError, match="not JSON"):
        await model.invoke(ASK, [], on_token=Tokens())


@pytest.mark.parametrize(
    ("finish_reason", "stop_reason"),
    [
        ("stop", "end"),
        ("tool_calls", "tool_calls"),
        ("length", "max_tokens"),
        ("content_filter", "content_filter"),
        ("eos", "other"),
    ],
)
@pytest.mark.anyio
async def test_why_the_answer_stopped_is_kept(
    sleeps: Sleeps, finish_reason: str, stop_reason: str
) -> None:
    whole = completion({"role": "assistant", "content": "The answer is"}, finish_reason)
    events = [(None, chunk({"content": "The answer is"})), (None, chunk({}, finish_reason))]
    fake = FakeProvider(json_response(200, whole), sse_response(events))
    model = openai(fake, sleeps)
    for answer in (await model.invoke(ASK, []), await model.invoke(ASK, [], on_token=Tokens())):
        assert (answer.stop_reason, answer.stop_detail) == (stop_reason, finish_reason)


@pytest.mark.anyio
async def test_a_refusal_is_not_an_answer(sleeps: Sleeps) -> None:
    """OpenAI says it in `refusal` (streamed as `delta.refusal`), with finish_reason `stop`."""
    said = "I'm sorry, I can't help with that."
    whole = completion({"role": "assistant", "content": None, "refusal": said}, "stop")
    events = [(None, chunk({"refusal": said[:8]})), (None, chunk({"refusal": said[8:]}))]
    events.append((None, chunk({}, "stop")))
    fake = FakeProvider(json_response(200, whole), sse_response(events))
    model = openai(fake, sleeps)
    for answer in (await model.invoke(ASK, []), await model.invoke(ASK, [], on_token=Tokens())):
        assert (answer.content, answer.stop_reason) == (said, "refusal")
