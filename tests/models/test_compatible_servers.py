"""OpenAI-compatible servers where they differ from OpenAI: Ollama, llama.cpp, vLLM, LM Studio,
Mistral's API. Each answer is in the server's own wire format."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from agent.errors import ModelHTTPError, ModelResponseError
from agent.messages import ToolCall, ToolDefinition, ToolMessage, UserMessage
from agent.models import FallbackModel, ModelSettings, OpenAICompatibleModel, thinking_text

from .support import FakeProvider, Sleeps, Tokens, json_response, raw_of, retry_policy
from .test_openai import ASK, GET_SUM, chunk, compatible, completion

pytestmark = pytest.mark.anyio

CALCULATOR = ToolDefinition(
    name="calculator",
    description="Evaluate an arithmetic expression.",
    source_node="calculator",
    input_schema={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)


def event_stream(text: str, *, chunk_size: int = 7) -> httpx.Response:
    """A `text/event-stream` answer of exactly `text`, in small reads."""
    raw = text.encode()

    async def stream() -> AsyncIterator[bytes]:
        for start in range(0, len(raw), chunk_size):
            yield raw[start : start + chunk_size]

    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream())


def sse(*chunks: dict[str, Any] | str) -> httpx.Response:
    return event_stream(
        "".join(f"data: {c if isinstance(c, str) else json.dumps(c)}\n\n" for c in chunks)
    )


def ollama_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """A chunk as Ollama streams a tool call: whole, at index 0 whatever its place."""
    return chunk(
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": call_id,
                    "index": 0,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        }
    )


# -- 1. parallel calls all at index 0 -------------------------------------------------------


async def test_parallel_calls_streamed_at_one_index_with_new_ids_stay_apart(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(
        sse(
            ollama_call("call_x1", "calculator", '{"expression":"2+2"}'),
            ollama_call("call_x2", "get-sum", '{"a": 3, "b": 4}'),
            chunk({"role": "assistant", "content": ""}, "tool_calls"),
            "[DONE]",
        )
    )
    answer = await compatible(fake, sleeps).invoke(ASK, [CALCULATOR, GET_SUM], on_token=Tokens())
    assert answer.tool_calls == (
        ToolCall(id="call_x1", name="calculator", arguments={"expression": "2+2"}),
        ToolCall(id="call_x2", name="get-sum", arguments={"a": 3, "b": 4}),
    )


async def test_deltas_of_one_call_that_repeat_its_id_are_still_one_call(sleeps: Sleeps) -> None:
    def part(arguments: str) -> dict[str, Any]:
        item = {"index": 0, "id": "call_1", "function": {"arguments": arguments}}
        return chunk({"tool_calls": [item]})

    first = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get-sum"}}
    fake = FakeProvider(
        sse(
            chunk({"tool_calls": [first]}),
            part('{"a": 1,'),
            part(' "b": 2}'),
            chunk({}, "tool_calls"),
        )
    )
    answer = await compatible(fake, sleeps).invoke(ASK, [GET_SUM], on_token=Tokens())
    assert answer.tool_calls == (ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),)


# -- 2. stream_options refused ---------------------------------------------------------------

MISTRAL_EXTRA_FORBIDDEN = {
    "object": "error",
    "message": {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "stream_options", "include_usage"],
                "msg": "Extra inputs are not permitted",
                "input": True,
            }
        ]
    },
    "type": "invalid_request_error",
    "param": None,
    "code": None,
}


def mistral_stream(with_usage: bool) -> httpx.Response:
    """Mistral's API streams usage in its last chunk unasked."""
    last = chunk({"content": ""}, "stop")
    if with_usage:
        last["usage"] = {"prompt_tokens": 12, "total_tokens": 17, "completion_tokens": 5}
    return sse(chunk({"role": "assistant", "content": "42"}), last, "[DONE]")


def mistral(fake: FakeProvider, sleeps: Sleeps, **settings: Any) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(
        "https://api.mistral.ai/v1",
        "mistral-small-latest",
        api_key="mistral-key-123",
        http_client=fake.client(),
        retry=retry_policy(sleeps),
        settings=ModelSettings(**settings),
    )


@pytest.mark.parametrize("with_usage", [True, False], ids=["usage-unasked", "no-usage"])
async def test_a_server_that_refuses_stream_options_is_sent_none_from_then_on(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture, with_usage: bool
) -> None:
    fake = FakeProvider(
        json_response(422, MISTRAL_EXTRA_FORBIDDEN),
        mistral_stream(with_usage),
        mistral_stream(with_usage),
    )
    model = mistral(fake, sleeps)
    first = await model.invoke(ASK, [], on_token=Tokens())
    second = await model.invoke(ASK, [], on_token=Tokens())
    assert (first.content, second.content) == ("42", "42")
    assert "stream_options" in fake.body(0)
    assert "stream_options" not in fake.body(1)
    assert "stream_options" not in fake.body(2)  # remembered
    assert all(fake.body(i)["stream"] is True for i in range(3))
    assert first.usage.input_tokens == (12 if with_usage else 0)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert "refused stream_options" in warning
    assert "sent none from now on" in warning
    if with_usage:
        assert "usage is read where the server puts it" in warning
    else:
        assert "usage of its streamed answers is unknown" in warning
    assert "mistral-key-123" not in warning


async def test_stream_options_set_in_extra_body_are_dropped_too_once_refused(
    sleeps: Sleeps,
) -> None:
    fake = FakeProvider(json_response(422, MISTRAL_EXTRA_FORBIDDEN), mistral_stream(True))
    model = mistral(fake, sleeps, extra_body={"stream_options": {}})
    await model.invoke(ASK, [], on_token=Tokens())
    assert fake.body(0)["stream_options"] == {"include_usage": True}
    assert "stream_options" not in fake.body(1)


async def test_a_4xx_about_something_else_is_not_sent_again(sleeps: Sleeps) -> None:
    refused = {"object": "error", "message": "Invalid model: mistral-huge", "type": "invalid_model"}
    fake = FakeProvider(json_response(400, refused))
    with pytest.raises(ModelHTTPError, match="Invalid model"):
        await mistral(fake, sleeps).invoke(ASK, [], on_token=Tokens())
    assert len(fake.requests) == 1


async def test_groqs_usage_in_x_groq_is_read(sleeps: Sleeps) -> None:
    last = chunk({}, "stop")
    last["x_groq"] = {"id": "req_01", "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    fake = FakeProvider(sse(chunk({"role": "assistant", "content": "42"}), last, "[DONE]"))
    answer = await compatible(fake, sleeps).invoke(ASK, [], on_token=Tokens())
    assert (answer.usage.input_tokens, answer.usage.output_tokens) == (9, 3)


# -- 3. llama.cpp's `error:` line ------------------------------------------------------------

LLAMACPP_ERROR_LINE = (
    'error: {"code":400,"message":"the request exceeds the available context size. try '
    'increasing the context size or enable context shift","type":"invalid_request_error"}\n\n'
    "data: [DONE]\n\n"
)


async def test_llamacpps_error_line_is_an_error_and_a_fallback_list_moves_on(
    sleeps: Sleeps,
) -> None:
    llama = FakeProvider(event_stream(LLAMACPP_ERROR_LINE))
    backup = FakeProvider(sse(chunk({"role": "assistant", "content": "42"}, "stop")))
    first = compatible(llama, sleeps)
    with pytest.raises(ModelResponseError, match="exceeds the available context size"):
        await first.invoke(ASK, [], on_token=Tokens())
    llama = FakeProvider(event_stream(LLAMACPP_ERROR_LINE))
    models = FallbackModel([compatible(llama, sleeps), compatible(backup, sleeps)])
    answer = await models.invoke(ASK, [], on_token=Tokens())
    assert answer.content == "42"


# -- 4. <think> in content -------------------------------------------------------------------

THOUGHT = "<think>\nThe user wants 17 + 25. That is 42.\n</think>\n\n"


async def test_a_leading_think_block_is_reasoning_not_the_answer(sleeps: Sleeps) -> None:
    whole = json_response(200, completion({"role": "assistant", "content": THOUGHT + "It is 42."}))
    text = THOUGHT + "It is 42."
    pieces = [text[i : i + 5] for i in range(0, len(text), 5)]  # tags split across chunks
    streamed = sse(
        chunk({"role": "assistant", "content": ""}),
        *(chunk({"content": piece}) for piece in pieces),
        chunk({}, "stop"),
    )
    fake = FakeProvider(whole, streamed, json_response(200, completion({"content": "ok"})))
    model = compatible(fake, sleeps)
    tokens = Tokens()
    once = await model.invoke(ASK, [])
    stream = await model.invoke(ASK, [], on_token=tokens)
    assert once.content == stream.content == "It is 42."
    assert "".join(tokens.received) == "It is 42."
    assert raw_of(stream)["message"]["content"] == text  # kept, as the server sent it

    # Sent back to the same server as it came, in content.
    await model.invoke([*ASK, stream, UserMessage(content="And 43?")], [])
    assert fake.body()["messages"][2] == {"role": "assistant", "content": text}


async def test_a_think_block_before_a_tool_call_goes_back_with_the_call(sleeps: Sleeps) -> None:
    content = THOUGHT.replace("That is 42.", 'Maybe {"name": "get-sum"}?')
    call = {"id": "call_1", "type": "function", "function": {"name": "get-sum", "arguments": "{}"}}
    message = {"role": "assistant", "content": content, "tool_calls": [call]}
    fake = FakeProvider(
        json_response(200, completion(message, "tool_calls")),
        json_response(200, completion({"role": "assistant", "content": "ok"})),
    )
    model = compatible(fake, sleeps)
    answer = await model.invoke(ASK, [GET_SUM])
    assert answer.content == ""
    assert [c.id for c in answer.tool_calls] == ["call_1"]
    result = ToolMessage(tool_call_id="call_1", name="get-sum", content="42")
    await model.invoke([*ASK, answer, result], [GET_SUM])
    assert fake.body()["messages"][2]["content"] == content


@pytest.mark.parametrize(
    "content",
    ["The tag <think> is HTML-like.", "<thinking>no</thinking> 42", "  4 < 5, so <think>"],
)
async def test_text_that_does_not_start_with_a_think_block_is_left_alone(
    sleeps: Sleeps, content: str
) -> None:
    streamed = sse(*(chunk({"content": c}) for c in content), chunk({}, "stop"))
    fake = FakeProvider(json_response(200, completion({"content": content})), streamed)
    model = compatible(fake, sleeps)
    tokens = Tokens()
    assert (await model.invoke(ASK, [])).content == content
    assert (await model.invoke(ASK, [], on_token=tokens)).content == content
    assert "".join(tokens.received) == content


async def test_a_think_block_cut_at_the_token_limit_leaves_no_answer(sleeps: Sleeps) -> None:
    cut = completion({"role": "assistant", "content": "<think>\nFirst, add 17"}, "length")
    answer = await compatible(FakeProvider(json_response(200, cut)), sleeps).invoke(ASK, [])
    assert (answer.content, answer.stop_reason) == ("", "max_tokens")


# -- 5. tool calls the gateway cannot read ---------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>\n{"name": "get-sum", "arguments": {"a": 1, \n</tool_call>',
        "[TOOL_CALLS]get-sum[ARGS]{not json",
        "[get-sum(a=1, b=2)]",
        "[calculator(2 + 2)]",
    ],
    ids=["broken-hermes", "broken-mistral", "pythonic-name-no-python-name", "positional-pythonic"],
)
async def test_a_tool_call_written_as_text_that_cannot_be_read_fails_with_what_to_do(
    sleeps: Sleeps, content: str
) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": content})))
    with pytest.raises(ModelResponseError) as caught:
        await compatible(fake, sleeps).invoke(ASK, [GET_SUM, CALCULATOR])
    said = str(caught.value)
    assert "the model wrote a tool call the gateway could not read" in said
    assert "--tool-call-parser" in said


DEEP = "[" * 3_000  # deeper than Python's json reads (its recursion limit)


async def test_bare_json_nested_deeper_than_python_reads_stays_the_answer(sleeps: Sleeps) -> None:
    content = 'I will compute it: "name" ' + DEEP
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": content})))
    answer = await compatible(fake, sleeps).invoke(ASK, [CALCULATOR])
    assert answer.content == content
    assert answer.tool_calls == ()


@pytest.mark.parametrize(
    "content",
    [
        '<tool_call>{"name": "calculator", "arguments": ' + DEEP + "</tool_call>",
        "[TOOL_CALLS]calculator[ARGS]" + DEEP,
    ],
    ids=["hermes-tag", "mistral-args"],
)
async def test_a_call_nested_deeper_than_python_reads_is_a_call_that_cannot_be_read(
    sleeps: Sleeps, content: str
) -> None:
    fake = FakeProvider(json_response(200, completion({"role": "assistant", "content": content})))
    with pytest.raises(ModelResponseError, match="the model wrote a tool call the gateway could"):
        await compatible(fake, sleeps).invoke(ASK, [CALCULATOR])


@pytest.mark.parametrize(
    "arguments",
    ['{"expression": ' + DEEP, '{"expression": ' + "[" * 300 + "]" * 300 + "}"],
    ids=["deeper-than-python-reads", "deeper-than-a-call-holds"],
)
async def test_call_arguments_nested_too_deep_go_back_to_the_model_as_invalid(
    sleeps: Sleeps, arguments: str
) -> None:
    function = {"name": "calculator", "arguments": arguments}
    call: dict[str, Any] = {"id": "call_1", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    fake = FakeProvider(json_response(200, completion(message, "tool_calls")))
    answer = await compatible(fake, sleeps).invoke(ASK, [CALCULATOR])
    assert answer.tool_calls == (
        ToolCall(id="call_1", name="calculator", invalid_arguments=arguments),
    )


async def test_qwen3_coder_xml_streamed_becomes_a_call_of_the_declared_types(
    sleeps: Sleeps,
) -> None:
    text = (
        "<tool_call>\n<function=get-sum>\n<parameter=a>\n17\n</parameter>\n"
        "<parameter=b>\n25\n</parameter>\n</function>\n</tool_call>"
    )
    pieces = [chunk({"content": text[i : i + 9]}) for i in range(0, len(text), 9)]
    fake = FakeProvider(sse(*pieces, chunk({}, "stop"), "[DONE]"))
    answer = await compatible(fake, sleeps).invoke(ASK, [GET_SUM], on_token=Tokens())
    assert answer.content == ""
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get-sum", {"a": 17, "b": 25})]


async def test_a_call_written_as_text_is_not_streamed_as_words(sleeps: Sleeps) -> None:
    """The reader sees the words before the call, not the call's markup (it is read as a call
    once the answer is whole); a sign split across deltas is held until it is known."""
    text = 'Let me add. <tool_call>\n{"name": "get-sum", "arguments": {"a": 17, "b": 25}}\n'
    text += "</tool_call>"
    pieces = [chunk({"content": text[i : i + 5]}) for i in range(0, len(text), 5)]
    fake = FakeProvider(sse(*pieces, chunk({}, "tool_calls"), "[DONE]"))
    tokens = Tokens()
    answer = await compatible(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)
    assert [(c.name, c.arguments) for c in answer.tool_calls] == [("get-sum", {"a": 17, "b": 25})]
    assert "".join(tokens.received) == "Let me add. "


async def test_words_that_only_look_like_the_start_of_a_call_are_all_streamed(
    sleeps: Sleeps,
) -> None:
    text = "Since 3 < 4 and [1] < [2], the answer is <"  # ends as a sign might begin
    pieces = [chunk({"content": text[i : i + 3]}) for i in range(0, len(text), 3)]
    fake = FakeProvider(sse(*pieces, chunk({}, "stop"), "[DONE]"))
    tokens = Tokens()
    answer = await compatible(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)
    assert answer.content == text
    assert "".join(tokens.received) == text  # what was held is let go with the last delta


# -- 8. an error said as a string ------------------------------------------------------------


async def test_an_error_string_in_a_200_body_is_said(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, {"error": "model 'qwen2.5' not found"}))
    with pytest.raises(ModelResponseError, match=r"model 'qwen2\.5' not found"):
        await compatible(fake, sleeps).invoke(ASK, [])


# -- 10. a base URL without /v1 --------------------------------------------------------------


async def test_a_404_says_the_url_and_suggests_v1(sleeps: Sleeps) -> None:
    fake = FakeProvider(httpx.Response(404, text="Not Found"), httpx.Response(404, text="{}"))
    model = OpenAICompatibleModel(
        "http://127.0.0.1:8080", "m", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelHTTPError) as caught:
        await model.invoke(ASK, [])
    said = str(caught.value)
    assert "HTTP 404" in said
    assert "POST http://127.0.0.1:8080/chat/completions" in said
    assert "is the base URL http://127.0.0.1:8080/v1?" in said
    assert caught.value.status_code == 404
    with_v1 = OpenAICompatibleModel(
        "http://127.0.0.1:8080/v1", "m", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    with pytest.raises(ModelHTTPError) as caught:
        await with_v1.invoke(ASK, [])
    assert "/v1?" not in str(caught.value)


# -- 11. Mistral's content chunks (reasoning_effort, Magistral) ------------------------------

MISTRAL_THOUGHT = "The user wants 17 + 25: get-sum adds two numbers."
MISTRAL_THINKING: dict[str, Any] = {
    "type": "thinking",
    "thinking": [{"type": "text", "text": MISTRAL_THOUGHT}],
}


def mistral_answer(message: dict[str, Any], finish_reason: str = "stop") -> dict[str, Any]:
    """A chat completion as Mistral's API answers it (its docs' shape)."""
    return {
        "id": "cf79f7daaee244b1a0ae5c7b1444424a",
        "object": "chat.completion",
        "model": "mistral-medium-3-5",
        "usage": {"prompt_tokens": 30, "completion_tokens": 120, "total_tokens": 150},
        "created": 1759500534,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }


def mistral_chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish_reason}
    return {
        "id": "cf79f7daaee244b1a0ae5c7b1444424a",
        "object": "chat.completion.chunk",
        "created": 1759500534,
        "model": "mistral-medium-3-5",
        "choices": [choice],
    }


async def test_mistrals_text_chunks_are_the_answer_and_its_thinking_chunks_thinking(
    sleeps: Sleeps,
) -> None:
    content = [MISTRAL_THINKING, {"type": "text", "text": "17 + 25 = 42."}]
    whole = json_response(
        200, mistral_answer({"role": "assistant", "tool_calls": None, "content": content})
    )
    thought = [MISTRAL_THOUGHT[:20], MISTRAL_THOUGHT[20:]]  # one thinking chunk, streamed in two
    streamed = sse(
        mistral_chunk({"role": "assistant", "content": ""}),
        *(
            mistral_chunk(
                {"content": [{"type": "thinking", "thinking": [{"type": "text", "text": t}]}]}
            )
            for t in thought
        ),
        mistral_chunk({"content": [{"type": "text", "text": "17 + 25"}]}),
        mistral_chunk({"content": " = 42."}),  # after its thinking, Mistral streams strings
        mistral_chunk({}, "stop"),
    )
    fake = FakeProvider(whole, streamed)
    model = mistral(fake, sleeps)
    once = await model.invoke(ASK, [])
    tokens = Tokens()
    stream = await model.invoke(ASK, [], on_token=tokens)
    assert once.content == stream.content == "17 + 25 = 42."
    assert tokens.received == ["17 + 25", " = 42."]  # the thinking is not the answer
    assert thinking_text(once.raw, once.content) == MISTRAL_THOUGHT
    assert thinking_text(stream.raw, stream.content) == MISTRAL_THOUGHT
    assert raw_of(once)["message"]["content"] == raw_of(stream)["message"]["content"] == content


async def test_mistrals_thinking_goes_back_with_its_tool_calls_as_it_came(sleeps: Sleeps) -> None:
    call = {"id": "D681PevKs", "function": {"name": "get-sum", "arguments": '{"a": 17, "b": 25}'}}
    asked = {"role": "assistant", "tool_calls": [call], "content": [MISTRAL_THINKING]}
    fake = FakeProvider(
        json_response(200, mistral_answer(asked, "tool_calls")),
        json_response(200, mistral_answer({"role": "assistant", "content": "42."})),
    )
    model = mistral(fake, sleeps)
    answer = await model.invoke(ASK, [GET_SUM])
    assert (answer.content, [c.id for c in answer.tool_calls]) == ("", ["D681PevKs"])
    result = ToolMessage(tool_call_id="D681PevKs", name="get-sum", content="42")
    await model.invoke([*ASK, answer, result], [GET_SUM])
    sent = fake.body()["messages"][2]
    assert sent["content"] == [MISTRAL_THINKING]
    assert [c["id"] for c in sent["tool_calls"]] == ["D681PevKs"]
