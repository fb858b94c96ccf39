"""The OpenAI Responses API provider (`openai-responses:`) against real-format responses and
event streams (shapes from OpenAI's API reference and openai-python's `types/responses`)."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from agent import (
    ActionResponse,
    AgentItem,
    AgentResult,
    EngineRequest,
    EngineResponse,
    ToolsAgent,
)
from agent.errors import ModelConnectionError, ModelHTTPError, ModelResponseError
from agent.messages import (
    AssistantMessage,
    MediaPart,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from agent.models import ModelSettings, OpenAIResponsesModel, model_from_spec, thinking_text
from agent.models.spec import native_output_refused
from agent.native_output import native_output

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

pytestmark = pytest.mark.anyio

KEY = "sk-proj-test-9c1e77a0"
GET_SUM = next(t for t in load_tools("server-everything") if t.name == "get-sum")
READ_FILE = next(t for t in load_tools("server-filesystem") if t.name == "read_text_file")
ASK = [SystemMessage(content="Be brief."), UserMessage(content="What is 17 + 25?")]

REASONING: dict[str, Any] = {
    "id": "rs_68af4030baa48193b0b43b4c2a176a1a05438e46b5f69a3b",
    "type": "reasoning",
    "encrypted_content": "gAAAAABor0AyJZ7bBqP1x0kT3mVn2Qe8Rr5Yh1Lw6SdA9cF4gU0iO7pK3jH2tZ5x==",
    "summary": [{"type": "summary_text", "text": "**Adding numbers**\n\nI should call get-sum."}],
}
CALL: dict[str, Any] = {
    "id": "fc_68af4031ab2c8193a4e2c1f9d6b8e0a705438e46b5f69a3b",
    "type": "function_call",
    "status": "completed",
    "arguments": '{"a":17,"b":25}',
    "call_id": "call_hZrFpWJ8PaD1oJZ4uyjWyKyN",
    "name": "get-sum",
}
MESSAGE: dict[str, Any] = {
    "id": "msg_68af4032c4d08193a1f3e2b7c9d0e1f205438e46b5f69a3b",
    "type": "message",
    "status": "completed",
    "content": [
        {"type": "output_text", "annotations": [], "logprobs": [], "text": "17 + 25 = 42."}
    ],
    "role": "assistant",
}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
USAGE: dict[str, Any] = {
    "input_tokens": 81,
    "input_tokens_details": {"cached_tokens": 64},
    "output_tokens": 212,
    "output_tokens_details": {"reasoning_tokens": 192},
    "total_tokens": 293,
}


def response(
    output: list[dict[str, Any]],
    *,
    status: str = "completed",
    incomplete: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "id": "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b",
        "object": "response",
        "created_at": 1756315696,
        "status": status,
        "background": False,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": None,
        "max_output_tokens": None,
        "model": "gpt-5-mini-2025-08-07",
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": "medium", "summary": None},
        "service_tier": "default",
        "store": False,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": USAGE,
        "user": None,
        "metadata": {},
    }


def event_stream(events: list[dict[str, Any]]) -> httpx.Response:
    """An event stream of `events`, each under its `type` as OpenAI names them."""
    return sse_response([(str(event["type"]), event) for event in events])


def model(fake: FakeProvider, sleeps: Sleeps, **kwargs: Any) -> OpenAIResponsesModel:
    return OpenAIResponsesModel(
        "gpt-5-mini", api_key=KEY, http_client=fake.client(), retry=retry_policy(sleeps), **kwargs
    )


async def test_request_and_a_parsed_answer_with_reasoning_and_a_call(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, response([REASONING, CALL])))
    settings = ModelSettings(max_tokens=2000, extra_body={"reasoning": {"effort": "high"}})
    answer = await model(fake, sleeps, settings=settings).invoke(ASK, [GET_SUM, READ_FILE])

    request = fake.requests[0]
    assert str(request.url) == "https://api.openai.com/v1/responses"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = fake.body()
    assert body["model"] == "gpt-5-mini"
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 17 + 25?"},
    ]
    assert body["store"] is False
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["max_output_tokens"] == 2000
    assert body["reasoning"] == {"effort": "high"}
    assert "stream" not in body
    get_sum, read_file = body["tools"]
    assert get_sum == {
        "type": "function",
        "name": "get-sum",
        "description": GET_SUM.description,
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "number", "description": "First number"},
                "b": {"type": "number", "description": "Second number"},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "strict": True,
    }
    # Optional parameters: not strict, and said so (the Responses API takes unsaid as strict).
    assert read_file["strict"] is False
    assert read_file["name"] == "read_text_file"

    assert answer.tool_calls == (
        ToolCall(id="call_hZrFpWJ8PaD1oJZ4uyjWyKyN", name="get-sum", arguments={"a": 17, "b": 25}),
    )
    assert answer.content == ""
    assert answer.stop_reason == "tool_calls"
    assert answer.usage == Usage(
        input_tokens=81, output_tokens=212, cached_tokens=64, reasoning_tokens=192, requests=1
    )
    assert answer.provider == "openai-responses"
    assert answer.raw == {
        "model": "openai-responses:gpt-5-mini",
        "output": [REASONING, CALL],
        "status": "completed",
    }
    assert answer.response_id == "resp_68af4030592c81938ec0a5fbab4a3e9f05438e46b5f69a3b"
    assert answer.response_model == "gpt-5-mini-2025-08-07"
    assert thinking_text(answer.raw) == "**Adding numbers**\n\nI should call get-sum."


async def test_a_text_answer(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, response([REASONING, MESSAGE])))
    answer = await model(fake, sleeps).invoke(ASK, [GET_SUM])
    assert answer.content == "17 + 25 = 42."
    assert answer.tool_calls == ()
    assert (answer.stop_reason, answer.stop_detail) == ("end", "completed")


async def run_two_steps(fake: FakeProvider, sleeps: Sleeps, *, resumed: bool) -> AgentResult:
    """The agent asks, the model calls get-sum, the tool answers 42, the model answers.
    `resumed`: the run stops after its first step, its metadata stored as JSON, and goes on
    in another agent and model (another process)."""
    agent = ToolsAgent(model=model(fake, sleeps), tools=[GET_SUM])
    items = [AgentItem(prompt="What is 17 + 25?")]
    request = await agent.step(items)
    assert isinstance(request, EngineRequest)
    done = [ActionResponse(action=a, data={"response": "42"}) for a in request.actions]
    response_ = EngineResponse(action_responses=done, metadata=request.metadata)
    if resumed:
        response_ = EngineResponse.model_validate_json(response_.model_dump_json())
        agent = ToolsAgent(model=model(fake, sleeps), tools=[GET_SUM])
    result = await agent.step(items, response_)
    assert isinstance(result, AgentResult)
    return result


@pytest.mark.parametrize("resumed", [False, True], ids=["one process", "stored and resumed"])
async def test_step_two_sends_step_ones_reasoning_verbatim_before_its_call_and_output(
    sleeps: Sleeps, resumed: bool
) -> None:
    fake = FakeProvider(
        json_response(200, response([REASONING, CALL])),
        json_response(200, response([MESSAGE])),
    )
    result = await run_two_steps(fake, sleeps, resumed=resumed)
    assert result.items[0].output == "17 + 25 = 42."
    sent = fake.body()["input"]
    assert sent[-3:] == [
        REASONING,  # encrypted content and summary as they came
        CALL,
        {"type": "function_call_output", "call_id": CALL["call_id"], "output": "42"},
    ]
    assert sent[:-3] == [
        {"role": "system", "content": "You are a helpful assistant"},
        {"role": "user", "content": "What is 17 + 25?"},
    ]


async def test_stream_passes_text_deltas_and_assembles_the_completed_response(
    sleeps: Sleeps,
) -> None:
    deltas = ["17 + 25", " = ", "42."]
    message_added: dict[str, Any] = {**MESSAGE, "status": "in_progress", "content": []}
    done = response([REASONING, MESSAGE])
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**done, "status": "in_progress", "output": []}},
        {"type": "response.in_progress", "response": {**done, "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0,
         "item": {**REASONING, "encrypted_content": "gAAAA"}},
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.added", "output_index": 1, "item": message_added},
        {"type": "response.content_part.added", "item_id": MESSAGE["id"], "output_index": 1,
         "content_index": 0, "part": {"type": "output_text", "annotations": [], "text": ""}},
        *({"type": "response.output_text.delta", "item_id": MESSAGE["id"], "output_index": 1,
           "content_index": 0, "delta": delta, "logprobs": []} for delta in deltas),
        {"type": "response.output_text.done", "item_id": MESSAGE["id"], "output_index": 1,
         "content_index": 0, "text": "17 + 25 = 42.", "logprobs": []},
        {"type": "response.output_item.done", "output_index": 1, "item": MESSAGE},
        {"type": "response.completed", "response": done},
    ]  # fmt: skip
    numbered: list[dict[str, Any]] = [
        {**event, "sequence_number": n} for n, event in enumerate(events)
    ]
    fake = FakeProvider(
        event_stream(numbered),
        json_response(200, done),
    )
    tokens = Tokens()
    streamed = await model(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)
    assert fake.body()["stream"] is True
    assert tokens.received == deltas
    whole = await model(fake, sleeps).invoke(ASK, [GET_SUM])
    assert streamed == whole
    assert raw_of(streamed)["output"] == [REASONING, MESSAGE]


async def test_a_streamed_call_is_read_from_its_done_items_when_the_end_has_none(
    sleeps: Sleeps,
) -> None:
    added = {**CALL, "status": "in_progress", "arguments": ""}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.done", "output_index": 0, "item": REASONING},
        {"type": "response.output_item.added", "output_index": 1, "item": added},
        {"type": "response.function_call_arguments.delta", "item_id": CALL["id"],
         "output_index": 1, "delta": '{"a":17,'},
        {"type": "response.function_call_arguments.delta", "item_id": CALL["id"],
         "output_index": 1, "delta": '"b":25}'},
        {"type": "response.function_call_arguments.done", "item_id": CALL["id"],
         "output_index": 1, "arguments": CALL["arguments"]},
        {"type": "response.output_item.done", "output_index": 1, "item": CALL},
        # A proxy that leaves the end event's output out: the items come from their events.
        {"type": "response.completed", "response": response([])},
    ]  # fmt: skip
    fake = FakeProvider(event_stream(events))
    tokens = Tokens()
    answer = await model(fake, sleeps).invoke(ASK, [GET_SUM], on_token=tokens)
    assert tokens.received == []
    assert answer.tool_calls == (
        ToolCall(id=CALL["call_id"], name="get-sum", arguments={"a": 17, "b": 25}),
    )
    assert raw_of(answer)["output"] == [REASONING, CALL]


async def test_a_stream_without_its_end_event_is_not_an_answer(sleeps: Sleeps) -> None:
    events: list[dict[str, Any]] = [
        {"type": "response.output_text.delta", "output_index": 0, "delta": "17"}
    ]
    fake = FakeProvider(event_stream(events))
    with pytest.raises(ModelConnectionError, match=r"no response\.completed"):
        await model(fake, sleeps).invoke(ASK, [], on_token=Tokens())


@pytest.mark.parametrize(
    ("event", "said"),
    [
        (
            {"type": "response.failed", "response": response(
                [], status="failed",
                error={"code": "server_error", "message": "The model had an error."})},
            "stream error: The model had an error.",
        ),
        (
            {"type": "error", "code": "ERR_SOMETHING", "message": "Something went wrong",
             "param": None, "sequence_number": 1},
            "stream error: Something went wrong",
        ),
    ],
)  # fmt: skip
async def test_a_failed_stream_says_the_providers_words(
    sleeps: Sleeps, event: dict[str, Any], said: str
) -> None:
    fake = FakeProvider(event_stream([event]))
    with pytest.raises(ModelResponseError, match=said):
        await model(fake, sleeps).invoke(ASK, [], on_token=Tokens())


async def test_a_failed_response_is_the_providers_error(sleeps: Sleeps) -> None:
    error = {"code": "server_error", "message": "The model had an error."}
    fake = FakeProvider(json_response(200, response([], status="failed", error=error)))
    with pytest.raises(ModelResponseError, match="The model had an error"):
        await model(fake, sleeps).invoke(ASK, [])


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_an_answer_cut_at_max_output_tokens_stops_short_and_its_reasoning_stays(
    sleeps: Sleeps, streamed: bool
) -> None:
    cut = response(
        [{**REASONING, "status": "incomplete"}],
        status="incomplete",
        incomplete={"reason": "max_output_tokens"},
    )
    given = (
        event_stream([{"type": "response.incomplete", "response": cut}])
        if streamed
        else json_response(200, cut)
    )
    fake = FakeProvider(given, json_response(200, response([MESSAGE])))
    gpt = model(fake, sleeps, settings=ModelSettings(max_tokens=16))
    answer = await gpt.invoke(ASK, [], on_token=Tokens() if streamed else None)
    assert (answer.stop_reason, answer.stop_detail) == ("max_tokens", "max_output_tokens")
    assert answer.content == ""
    # Sent back, a reasoning item nothing follows is refused: it is left out.
    await gpt.invoke([*ASK, answer, UserMessage(content="Go on.")], [])
    assert fake.body()["input"][2:] == [{"role": "user", "content": "Go on."}]


async def test_an_item_whose_answer_was_cut_off_fails_saying_so(sleeps: Sleeps) -> None:
    said = {**MESSAGE, "status": "incomplete", "content": [{**MESSAGE["content"][0], "text": "17"}]}
    cut = response(
        [REASONING, said], status="incomplete", incomplete={"reason": "max_output_tokens"}
    )
    fake = FakeProvider(json_response(200, cut))
    result = await ToolsAgent(model=model(fake, sleeps)).step([AgentItem(prompt="17 + 25?")])
    assert isinstance(result, AgentResult)
    [item] = result.items
    assert item.output == "17"
    assert item.error is not None
    assert item.error.startswith(
        "the answer was cut off at the model's output token limit (max_output_tokens)"
    )


async def test_a_refusal_is_said_and_stops_the_answer(sleeps: Sleeps) -> None:
    refusal = {
        **MESSAGE,
        "content": [{"type": "refusal", "refusal": "I can't help with that."}],
    }
    fake = FakeProvider(json_response(200, response([refusal])))
    answer = await model(fake, sleeps).invoke(ASK, [])
    assert answer.content == "I can't help with that."
    assert answer.stop_reason == "refusal"


async def test_a_429_is_retried_after_the_wait_asked_for(sleeps: Sleeps) -> None:
    limited = {
        "error": {
            "message": "Rate limit reached for gpt-5-mini on tokens per min (TPM).",
            "type": "tokens",
            "param": None,
            "code": "rate_limit_exceeded",
        }
    }
    fake = FakeProvider(
        json_response(429, limited, headers={"retry-after-ms": "1200"}),
        json_response(200, response([MESSAGE])),
    )
    answer = await model(fake, sleeps).invoke(ASK, [])
    assert answer.content == "17 + 25 = 42."
    assert sleeps.delays == [1.2]
    assert len(fake.requests) == 2
    assert fake.body(0) == fake.body(1)


async def test_a_400_says_the_providers_message_without_the_key(sleeps: Sleeps) -> None:
    bad = {
        "error": {
            "message": f"Invalid 'input[2].call_id' (key {KEY}).",
            "type": "invalid_request_error",
            "param": "input[2].call_id",
            "code": None,
        }
    }
    fake = FakeProvider(json_response(400, bad))
    with pytest.raises(ModelHTTPError) as caught:
        await model(fake, sleeps).invoke(ASK, [])
    assert caught.value.status_code == 400
    assert "Invalid 'input[2].call_id'" in str(caught.value)
    assert KEY not in str(caught.value)
    assert len(fake.requests) == 1


async def test_a_model_that_does_not_reason_is_asked_for_no_encrypted_reasoning(
    sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    refused = {
        "error": {
            "message": "Encrypted content is not supported with this model.",
            "type": "invalid_request_error",
            "param": "include",
            "code": None,
        }
    }
    fake = FakeProvider(
        json_response(400, refused),
        json_response(200, response([MESSAGE])),
        json_response(200, response([MESSAGE])),
    )
    gpt = model(fake, sleeps)
    with caplog.at_level(logging.WARNING, logger="agent.models"):
        await gpt.invoke(ASK, [])
        await gpt.invoke(ASK, [])
    assert fake.body(0)["include"] == ["reasoning.encrypted_content"]
    assert "include" not in fake.body(1)
    assert "include" not in fake.body(2)
    warned = [r.getMessage() for r in caplog.records if "encrypted" in r.getMessage()]
    assert len(warned) == 1
    assert "asked for none from now on" in warned[0]


async def test_native_output_holds_the_answer_to_a_strict_json_schema(sleeps: Sleeps) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"total": {"type": "number"}},
        "required": ["total"],
        "additionalProperties": False,
    }
    said = {**MESSAGE, "content": [{**MESSAGE["content"][0], "text": '{"total": 42}'}]}
    fake = FakeProvider(json_response(200, response([said])))
    with native_output(schema):
        answer = await model(fake, sleeps).invoke(ASK, [])
    assert fake.body()["text"] == {
        "format": {"type": "json_schema", "name": "final_result", "schema": schema, "strict": True}
    }
    assert answer.content == '{"total": 42}'


async def test_a_tools_images_go_inside_its_call_output(sleeps: Sleeps) -> None:
    asked = AssistantMessage(
        tool_calls=(ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),)
    )
    result = ToolMessage(
        tool_call_id="call_1",
        name="get-sum",
        content="A chart: [image: image/png, 70 bytes]",
        media=(MediaPart(type="image", media_type="image/png", data=PNG),),
    )
    fake = FakeProvider(json_response(200, response([MESSAGE])))
    await model(fake, sleeps).invoke([*ASK, asked, result], [GET_SUM])
    assert fake.body()["input"][-1] == {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [
            {"type": "input_text", "text": "A chart: [image: image/png, 70 bytes]"},
            {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
        ],
    }


async def test_a_model_that_refuses_images_is_sent_their_descriptions_only(
    sleeps: Sleeps,
) -> None:
    asked = AssistantMessage(
        tool_calls=(ToolCall(id="call_1", name="get-sum", arguments={"a": 1, "b": 2}),)
    )
    result = ToolMessage(
        tool_call_id="call_1",
        name="get-sum",
        content="A chart: [image: image/png, 70 bytes]",
        media=(MediaPart(type="image", media_type="image/png", data=PNG),),
    )
    refused = {
        "error": {
            "message": "Invalid content type. image_url is only supported by certain models.",
            "type": "invalid_request_error",
            "param": "input[3].output",
            "code": None,
        }
    }
    fake = FakeProvider(
        json_response(400, refused),
        json_response(200, response([MESSAGE])),
        json_response(200, response([MESSAGE])),
    )
    gpt = model(fake, sleeps)
    await gpt.invoke([*ASK, asked, result], [GET_SUM])
    await gpt.invoke([*ASK, asked, result], [GET_SUM])
    assert isinstance(fake.body(0)["input"][-1]["output"], list)
    for n in (1, 2):
        assert fake.body(n)["input"][-1]["output"] == "A chart: [image: image/png, 70 bytes]"


def test_its_native_output_is_taken_at_config_load() -> None:
    assert native_output_refused("openai-responses:gpt-5-mini", with_tools=True) is None


async def test_another_providers_answer_goes_as_its_text_and_calls(sleeps: Sleeps) -> None:
    chat = AssistantMessage(
        content="Let me add.",
        tool_calls=(ToolCall(id="call_1", name="get-sum", invalid_arguments='{"a": 1,'),),
        provider="openai",
        raw={"message": {"role": "assistant", "content": "Let me add."}},
    )
    fake = FakeProvider(json_response(200, response([MESSAGE])))
    result = ToolMessage(tool_call_id="call_1", name="get-sum", content="Error: ...")
    await model(fake, sleeps).invoke([*ASK, chat, result], [GET_SUM])
    assert fake.body()["input"][2:] == [
        {"role": "assistant", "content": "Let me add."},
        {"type": "function_call", "call_id": "call_1", "name": "get-sum", "arguments": '{"a": 1,'},
        {"type": "function_call_output", "call_id": "call_1", "output": "Error: ..."},
    ]


async def test_a_reasoning_item_without_encrypted_content_is_not_sent_statelessly(
    sleeps: Sleeps,
) -> None:
    bare = {key: value for key, value in REASONING.items() if key != "encrypted_content"}
    answer = AssistantMessage(
        tool_calls=(ToolCall(id=CALL["call_id"], name="get-sum", arguments={"a": 17, "b": 25}),),
        provider="openai-responses",
        raw={"model": "openai-responses:gpt-5-mini", "output": [bare, CALL]},
    )
    result = ToolMessage(tool_call_id=CALL["call_id"], name="get-sum", content="42")
    history = [*ASK, answer, result]
    fake = FakeProvider(json_response(200, response([MESSAGE])), json_response(200, response([])))
    # Looked up by its id, which a stateless request cannot: "Item with id 'rs_...' not found".
    await model(fake, sleeps).invoke(history, [GET_SUM])
    assert fake.body()["input"][2] == CALL
    stored = model(fake, sleeps, settings=ModelSettings(extra_body={"store": True}))
    await stored.invoke(history, [GET_SUM])
    assert fake.body()["input"][2:4] == [bare, CALL]


def test_the_spec_builds_it_with_the_openai_key_and_base_url() -> None:
    keys = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "https://llm.corp.example/v1"}
    built = model_from_spec("openai-responses:gpt-5-mini", api_keys=keys)
    assert isinstance(built, OpenAIResponsesModel)
    assert built.name == "openai-responses:gpt-5-mini"
    assert KEY not in repr(built)


async def test_the_spec_asks_the_base_url_it_names() -> None:
    fake = FakeProvider(json_response(200, response([MESSAGE])))
    keys = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "https://llm.corp.example/v1"}
    async with fake.client() as client:
        built = model_from_spec("openai-responses:gpt-5-mini", api_keys=keys, http_client=client)
        await built.invoke(ASK, [])
    assert str(fake.requests[0].url) == "https://llm.corp.example/v1/responses"
