"""The Gemini provider against real-format generateContent answers and SSE streams."""

from __future__ import annotations

import re
from typing import Any, cast

import pytest

from agent.errors import (
    ModelAuthError,
    ModelConnectionError,
    ModelHTTPError,
    ModelResponseError,
    fails_only_its_item,
)
from agent.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from agent.model import ServerAddress
from agent.models import GeminiModel, ModelSettings, answer_token_limit

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

KEY = "AIzaSyTest-0123456789abcdef"
TOOLS = load_tools("server-everything")
ASK = [SystemMessage(content="Be brief."), UserMessage(content="Add 17 and 25, and 1 and 2.")]
SIGNATURE = "CiQB0e2Kb2mZ1lWq8Tj3r8hk4uL2f5dYV0eXw=="
PARTS = [
    {"text": "**Adding**\nTwo sums needed.", "thought": True},
    {
        "functionCall": {"name": "get-sum", "args": {"a": 17, "b": 25}},
        "thoughtSignature": SIGNATURE,
    },
    {"functionCall": {"name": "get-sum", "args": {"a": 1, "b": 2}}},
]
USAGE = {
    "promptTokenCount": 120,
    "candidatesTokenCount": 30,
    "totalTokenCount": 200,
    "cachedContentTokenCount": 64,
    "thoughtsTokenCount": 50,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 120}],
}


def generated(parts: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage or USAGE,
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mPLcaNP2J7nN7M8PqKvYgAg",
    }


def model(fake: FakeProvider, sleeps: Sleeps, **kwargs: Any) -> GeminiModel:
    return GeminiModel(
        "gemini-2.5-flash",
        api_key=KEY,
        http_client=fake.client(),
        retry=retry_policy(sleeps),
        **kwargs,
    )


@pytest.mark.anyio
@pytest.mark.parametrize(("own", "sent"), [(None, 300), (100, 100)])
async def test_an_answer_token_limit_caps_max_output_tokens(
    sleeps: Sleeps, own: int | None, sent: int
) -> None:
    fake = FakeProvider(json_response(200, generated(PARTS)))
    with answer_token_limit(300):
        await model(fake, sleeps, settings=ModelSettings(max_tokens=own)).invoke(ASK, TOOLS)
    assert fake.body()["generationConfig"] == {"maxOutputTokens": sent}


@pytest.mark.anyio
async def test_request_and_parallel_calls_with_generated_ids(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, generated(PARTS)))
    settings = ModelSettings(max_tokens=256, temperature=0)
    answer = await model(fake, sleeps, settings=settings).invoke(ASK, TOOLS)

    request = fake.requests[0]
    assert str(request.url) == (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"
    )
    assert KEY not in str(request.url)
    assert request.headers["x-goog-api-key"] == KEY
    body = fake.body()
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "Add 17 and 25, and 1 and 2."}]}
    ]
    assert body["generationConfig"] == {"maxOutputTokens": 256, "temperature": 0}
    declarations = {d["name"]: d for d in body["tools"][0]["functionDeclarations"]}
    assert "parameters" not in declarations["get-env"]  # no parameters: Gemini wants none
    assert declarations["get-sum"]["parameters"] == {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "First number"},
            "b": {"type": "number", "description": "Second number"},
        },
        "required": ["a", "b"],
    }

    assert answer.content == ""  # the thought summary is not the answer
    first, second = answer.tool_calls
    assert (first.name, first.arguments) == ("get-sum", {"a": 17, "b": 25})
    assert (second.name, second.arguments) == ("get-sum", {"a": 1, "b": 2})
    assert first.id.startswith("call_")
    assert second.id.startswith("call_")
    assert first.id != second.id
    assert answer.usage == Usage(
        input_tokens=120, output_tokens=80, cached_tokens=64, reasoning_tokens=50, requests=1
    )
    assert answer.provider == "gemini"
    assert answer.raw == {
        "model": "gemini:gemini-2.5-flash",
        "parts": PARTS,
        "finish_reason": "STOP",
    }


@pytest.mark.anyio
async def test_thought_signatures_are_replayed_and_responses_grouped(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(200, generated(PARTS)),
        json_response(200, generated([{"text": "42 and 3."}])),
    )
    gemini = model(fake, sleeps)
    first = await gemini.invoke(ASK, TOOLS)
    results = [
        ToolMessage(tool_call_id=first.tool_calls[0].id, name="get-sum", content="42"),
        ToolMessage(
            tool_call_id=first.tool_calls[1].id, name="get-sum", content="Error: b", is_error=True
        ),
    ]
    second = await gemini.invoke([*ASK, first, *results], TOOLS)

    contents = fake.body()["contents"]
    assert contents[1] == {"role": "model", "parts": PARTS}
    # A failed call's words go under `error`, as Google's docs ask.
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get-sum", "response": {"result": "42"}}},
            {"functionResponse": {"name": "get-sum", "response": {"error": "Error: b"}}},
        ],
    }
    assert second.content == "42 and 3."


@pytest.mark.anyio
async def test_ids_given_by_gemini_are_kept_and_sent_back(sleeps: Sleeps) -> None:
    parts = [{"functionCall": {"id": "fc-7", "name": "echo", "args": {"message": "hi"}}}]
    fake = FakeProvider(
        json_response(200, generated(parts)), json_response(200, generated([{"text": "hi"}]))
    )
    gemini = model(fake, sleeps)
    first = await gemini.invoke(ASK, TOOLS)
    assert first.tool_calls == (ToolCall(id="fc-7", name="echo", arguments={"message": "hi"}),)
    await gemini.invoke(
        [*ASK, first, ToolMessage(tool_call_id="fc-7", name="echo", content="hi")], TOOLS
    )
    response = fake.body()["contents"][2]["parts"][0]["functionResponse"]
    assert response == {"name": "echo", "response": {"result": "hi"}, "id": "fc-7"}


@pytest.mark.anyio
async def test_foreign_assistant_messages_become_plain_parts(sleeps: Sleeps) -> None:
    foreign = AssistantMessage(
        content="Adding.",
        tool_calls=(ToolCall(id="toolu_1", name="get-sum", arguments={"a": 1, "b": 2}),),
        provider="anthropic",
        raw={"content": [{"type": "thinking", "thinking": "x", "signature": "sig"}]},
    )
    fake = FakeProvider(json_response(200, generated([{"text": "3"}])))
    history = [*ASK, foreign, ToolMessage(tool_call_id="toolu_1", name="get-sum", content="3")]
    await model(fake, sleeps).invoke(history, TOOLS)
    contents = fake.body()["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "Adding."},
            {"functionCall": {"name": "get-sum", "args": {"a": 1, "b": 2}}},
        ],
    }
    assert "id" not in contents[2]["parts"][0]["functionResponse"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "signed"),
    [("gemini-3-pro-preview", True), ("gemini-3.1-flash", True), ("gemini-2.5-flash", False)],
)
async def test_calls_gemini_did_not_sign_carry_googles_sentinel_to_gemini_3(
    sleeps: Sleeps, name: str, signed: bool
) -> None:
    """Gemini 3 answers 400 ("Function call is missing a thought_signature") to a turn whose
    calls carry none: another provider's calls (a fallback, `resume --model`), or Gemini's own
    unsigned ones, go with Google's documented sentinel. A turn Gemini signed goes as it came."""
    calls = tuple(ToolCall(id=f"call_{i}", name="get-sum", arguments={"a": i}) for i in (1, 2))
    foreign = AssistantMessage(tool_calls=calls, provider="openai", raw={"message": {}})
    own = AssistantMessage(
        tool_calls=(ToolCall(id="fc-1", name="get-sum", arguments={}),),
        provider="gemini",
        raw={"parts": [{"functionCall": {"name": "get-sum", "args": {}}}]},
    )
    results = [ToolMessage(tool_call_id=c.id, name="get-sum", content="3") for c in calls]
    history = [
        *ASK,
        foreign,
        *results,
        own,
        ToolMessage(tool_call_id="fc-1", name="get-sum", content="0"),
    ]
    fake = FakeProvider(
        json_response(200, generated([{"text": "3"}])),
        json_response(200, generated([{"text": "3"}])),
    )
    gemini = GeminiModel(name, api_key="k", http_client=fake.client(), retry=retry_policy(sleeps))
    await gemini.invoke(
        [*history, UserMessage(content="again"), first_signed_turn(), *results], TOOLS
    )
    turns = [c["parts"] for c in fake.body()["contents"] if c["role"] == "model"]
    sentinel = {"thoughtSignature": "skip_thought_signature_validator"} if signed else {}
    assert turns[0] == [
        {"functionCall": {"name": "get-sum", "args": {"a": 1}}, **sentinel},
        {"functionCall": {"name": "get-sum", "args": {"a": 2}}, **sentinel},
    ]
    assert turns[1] == [{"functionCall": {"name": "get-sum", "args": {}}, **sentinel}]
    assert turns[2] == PARALLEL_SIGNED  # its first call signed by Gemini: as it came


PARALLEL_SIGNED: list[dict[str, Any]] = [
    {"functionCall": {"name": "get-sum", "args": {"a": 1}}, "thoughtSignature": "CtIBAdHtim9"},
    {"functionCall": {"name": "get-sum", "args": {"a": 2}}},
]


def first_signed_turn() -> AssistantMessage:
    calls = tuple(ToolCall(id=f"call_{i}", name="get-sum", arguments={"a": i}) for i in (1, 2))
    return AssistantMessage(
        tool_calls=calls, provider="gemini", raw=cast(Any, {"parts": PARALLEL_SIGNED})
    )


@pytest.mark.anyio
async def test_stream_gives_tokens_and_the_same_message(sleeps: Sleeps) -> None:
    chunks: list[tuple[str | None, Any]] = [
        (None, generated([{"text": "The sums", "thought": False}], {"promptTokenCount": 120})),
        (None, generated([{"text": " are coming."}], {"promptTokenCount": 120})),
        (None, generated(PARTS[1:], USAGE)),
    ]
    whole = generated([{"text": "The sums are coming."}, *PARTS[1:]])
    fake = FakeProvider(sse_response(chunks), json_response(200, whole))
    gemini = model(fake, sleeps)
    tokens = Tokens()
    streamed = await gemini.invoke(ASK, TOOLS, on_token=tokens)
    once = await gemini.invoke(ASK, TOOLS)

    assert str(fake.requests[0].url).endswith(
        "/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert tokens.received == ["The sums", " are coming."]
    assert streamed.content == once.content == "The sums are coming."
    assert [(c.name, c.arguments) for c in streamed.tool_calls] == [
        (c.name, c.arguments) for c in once.tool_calls
    ]
    assert streamed.usage == once.usage
    for answer in (streamed, once):
        assert (answer.response_id, answer.response_model) == (
            "mPLcaNP2J7nN7M8PqKvYgAg",
            "gemini-2.5-flash",
        )
    assert gemini.server_of(once) == ServerAddress("generativelanguage.googleapis.com", 443)
    parts = raw_of(streamed)["parts"]
    assert parts[0] == {"text": "The sums are coming.", "thought": False}
    assert parts[1]["thoughtSignature"] == SIGNATURE


@pytest.mark.anyio
async def test_a_blocked_prompt_is_stopped_by_a_content_filter_not_an_error(
    sleeps: Sleeps,
) -> None:
    # What Gemini answers when its filters block the prompt itself: no candidates at all.
    blocked = {
        "promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 8, "totalTokenCount": 8},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "mPLcaNP2J7nN7M8PqKvYgAg",
    }
    fake = FakeProvider(json_response(200, blocked), sse_response([(None, blocked)]))
    gemini = model(fake, sleeps)
    tokens = Tokens()
    answers = [await gemini.invoke(ASK, []), await gemini.invoke(ASK, [], on_token=tokens)]
    for answer in answers:
        # As `finishReason: SAFETY` is: the item fails and says why; the run goes on.
        assert answer.stop_reason == "content_filter"
        assert answer.stop_detail == "prompt blocked: PROHIBITED_CONTENT"
        assert (answer.content, answer.tool_calls) == ("", ())
        assert answer.usage == Usage(input_tokens=8, requests=1)
        assert raw_of(answer)["block_reason"] == "PROHIBITED_CONTENT"
        assert (answer.response_id, answer.response_model) == (
            "mPLcaNP2J7nN7M8PqKvYgAg",
            "gemini-2.5-flash",
        )
    assert tokens.received == []


@pytest.mark.anyio
async def test_an_answer_without_candidates_or_a_block_reason_is_unreadable(
    sleeps: Sleeps,
) -> None:
    empty = {"usageMetadata": {"promptTokenCount": 8}, "modelVersion": "gemini-2.5-flash"}
    fake = FakeProvider(json_response(200, empty), sse_response([(None, empty)]))
    gemini = model(fake, sleeps)
    with pytest.raises(ModelResponseError, match="no candidates in the answer"):
        await gemini.invoke(ASK, [])
    with pytest.raises(ModelResponseError, match="no candidates in the answer"):
        await gemini.invoke(ASK, [], on_token=Tokens())


@pytest.mark.anyio
async def test_400_error_in_a_list_body(sleeps: Sleeps) -> None:
    error = [
        {
            "error": {
                "code": 400,
                "message": "Function call is missing a thought_signature in functionCall parts.",
                "status": "INVALID_ARGUMENT",
            }
        }
    ]
    fake = FakeProvider(json_response(400, error))
    with pytest.raises(ModelHTTPError) as caught:
        await model(fake, sleeps).invoke(ASK, TOOLS)
    assert caught.value.provider_message == (
        "Function call is missing a thought_signature in functionCall parts."
    )
    assert KEY not in str(caught.value)
    assert not isinstance(caught.value, ModelAuthError)
    assert fails_only_its_item(caught.value)  # that one request's content


API_KEY_INVALID = {
    "error": {
        "code": 400,
        "message": "API key not valid. Please pass a valid API key.",
        "status": "INVALID_ARGUMENT",
        "details": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "API_KEY_INVALID",
                "domain": "googleapis.com",
                "metadata": {"service": "generativelanguage.googleapis.com"},
            },
            {
                "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                "locale": "en-US",
                "message": "API key not valid. Please pass a valid API key.",
            },
        ],
    }
}
PERMISSION_DENIED = {
    "error": {
        "code": 403,
        "message": "Method doesn't allow unregistered callers (callers without established "
        "identity). Please use API Key or other form of API consumer identity to call this API.",
        "status": "PERMISSION_DENIED",
    }
}


@pytest.mark.anyio
async def test_a_wrong_key_stops_the_run_though_gemini_says_400(sleeps: Sleeps) -> None:
    fake = FakeProvider(
        json_response(400, API_KEY_INVALID),
        json_response(400, [API_KEY_INVALID]),  # as streamGenerateContent wraps it
        json_response(403, PERMISSION_DENIED),
    )
    gemini = model(fake, sleeps)
    for on_token in (None, Tokens(), None):
        with pytest.raises(ModelAuthError) as caught:
            await gemini.invoke(ASK, [], on_token=on_token)
        assert not fails_only_its_item(caught.value)  # every item would fail the same way
        assert caught.value.provider == "gemini"
    assert caught.value.status_code == 403
    assert len(fake.requests) == 3  # not retried


@pytest.mark.anyio
async def test_retry_after_as_http_date(sleeps: Sleeps) -> None:
    busy = json_response(
        503,
        {"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}},
        headers={"retry-after": "Thu, 01 Jan 2026 12:00:07 GMT"},
    )
    fake = FakeProvider(busy, json_response(200, generated([{"text": "ok"}])))
    answer = await model(fake, sleeps).invoke(ASK, [])
    assert answer.content == "ok"
    assert sleeps.delays == [7.0]  # the fake clock says 12:00:00


@pytest.mark.anyio
async def test_a_key_echoed_in_a_stream_error_is_scrubbed(sleeps: Sleeps) -> None:
    error = {"error": {"code": 400, "message": f"API key not valid: {KEY}", "status": "INVALID"}}
    fake = FakeProvider(sse_response([(None, error)]))
    with pytest.raises(ModelResponseError) as caught:
        await model(fake, sleeps).invoke(ASK, [], on_token=Tokens())
    assert KEY not in str(caught.value)
    assert "API key not valid: ***" in str(caught.value)


@pytest.mark.anyio
async def test_empty_text_parts_are_not_sent_back_but_signed_ones_are(sleeps: Sleeps) -> None:
    # Gemini streams `{"text": ""}` after function calls, and rejects empty text parts sent
    # back; an empty part that carries a thought signature must go back as it came.
    signed_empty = {"text": "", "thoughtSignature": SIGNATURE}
    chunks: list[tuple[str | None, Any]] = [
        (None, generated(PARTS[1:])),
        (None, generated([{"text": ""}])),
        (None, generated([signed_empty])),
    ]
    fake = FakeProvider(sse_response(chunks), json_response(200, generated([{"text": "4"}])))
    gemini = model(fake, sleeps)
    first = await gemini.invoke(ASK, TOOLS, on_token=Tokens())
    results = [ToolMessage(tool_call_id=c.id, name=c.name, content="x") for c in first.tool_calls]
    await gemini.invoke([*ASK, first, *results], TOOLS)
    sent = fake.body()["contents"][1]
    assert sent["role"] == "model"
    assert sent["parts"] == [*PARTS[1:], signed_empty]


@pytest.mark.anyio
async def test_a_stream_that_stops_before_its_finish_reason_is_not_an_answer(
    sleeps: Sleeps,
) -> None:
    def unfinished(parts: list[dict[str, Any]]) -> dict[str, Any]:
        chunk = generated(parts, {"promptTokenCount": 120})
        del chunk["candidates"][0]["finishReason"]
        return chunk

    chunks: list[tuple[str | None, Any]] = [
        (None, unfinished([{"text": "The sums"}])),
        (None, unfinished(PARTS[1:2])),
    ]
    fake = FakeProvider(sse_response(chunks))
    with pytest.raises(ModelConnectionError, match="stream ended before the answer was complete"):
        await model(fake, sleeps).invoke(ASK, TOOLS, on_token=Tokens())


@pytest.mark.anyio
async def test_a_json_array_answer_to_a_streaming_request_is_read(sleeps: Sleeps) -> None:
    # streamGenerateContent without `alt=sse` (a proxy that drops the query) sends its chunks
    # as one JSON array.
    chunks = [
        generated([{"text": "The sums"}], {"promptTokenCount": 120}),
        generated([{"text": " are coming."}, *PARTS[1:]]),
    ]
    del chunks[0]["candidates"][0]["finishReason"]
    fake = FakeProvider(json_response(200, chunks))
    tokens = Tokens()
    answer = await model(fake, sleeps).invoke(ASK, TOOLS, on_token=tokens)
    assert answer.content == "The sums are coming."
    assert [c.arguments for c in answer.tool_calls] == [{"a": 17, "b": 25}, {"a": 1, "b": 2}]
    assert answer.usage.output_tokens == 80
    assert answer.response_id == "mPLcaNP2J7nN7M8PqKvYgAg"
    assert tokens.received == ["The sums are coming."]


@pytest.mark.parametrize(
    ("finish_reason", "parts", "stop_reason"),
    [
        ("STOP", [{"text": "42"}], "end"),
        ("STOP", PARTS[1:], "tool_calls"),
        ("MAX_TOKENS", [{"text": "The sums are"}], "max_tokens"),
        ("SAFETY", [], "content_filter"),
        ("RECITATION", [], "content_filter"),
        ("MALFORMED_FUNCTION_CALL", [], "malformed_tool_call"),
        ("OTHER", [], "other"),
    ],
)
@pytest.mark.anyio
async def test_why_the_answer_stopped_is_kept(
    sleeps: Sleeps, finish_reason: str, parts: list[dict[str, Any]], stop_reason: str
) -> None:
    answer = generated(parts)
    answer["candidates"][0]["finishReason"] = finish_reason
    if not parts:  # a stopped candidate may come without content
        del answer["candidates"][0]["content"]
    fake = FakeProvider(json_response(200, answer), sse_response([(None, answer)]))
    gemini = model(fake, sleeps)
    for got in (
        await gemini.invoke(ASK, TOOLS),
        await gemini.invoke(ASK, TOOLS, on_token=Tokens()),
    ):
        assert (got.stop_reason, got.stop_detail) == (stop_reason, finish_reason)


EDGE = load_tools("schema-edge-cases")
ANNOTATE = next(t for t in EDGE if t.name == "annotate")
GET_ISSUE = next(t for t in EDGE if t.name == "get_issue")


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_free_form_objects_go_as_json_text_and_come_back_as_objects(
    sleeps: Sleeps, streamed: bool
) -> None:
    args = {"path": "notes.txt", "meta": '{"tags": ["a"], "pinned": true}'}
    answer = generated([{"functionCall": {"name": "annotate", "args": args}}])
    fake = FakeProvider(sse_response([(None, answer)]) if streamed else json_response(200, answer))
    tokens = Tokens() if streamed else None
    message = await model(fake, sleeps).invoke(ASK, [ANNOTATE, GET_ISSUE], on_token=tokens)

    annotate, get_issue = fake.body()["tools"][0]["functionDeclarations"]
    meta = annotate["parameters"]["properties"]["meta"]
    assert meta == {"type": "string", "description": "A JSON object, written as JSON text."}
    assert get_issue["description"].endswith(
        "Arguments must match exactly one of these forms: (1) with `identifier`; (2) with `url`."
    )
    assert set(get_issue["parameters"]["properties"]) == {"identifier", "url"}
    [call] = message.tool_calls
    assert call.name == "annotate"
    assert call.arguments == {"path": "notes.txt", "meta": {"tags": ["a"], "pinned": True}}
    assert raw_of(message)["parts"][0]["functionCall"]["args"] == args  # Gemini's own, to replay


@pytest.mark.anyio
async def test_names_gemini_refuses_are_declared_under_names_it_takes(sleeps: Sleeps) -> None:
    def tool(name: str) -> ToolDefinition:
        return ToolDefinition(name=name, description=name, source_node="n")

    tools = [tool("1pw__image"), tool("3d-render"), tool("_3d-render"), tool("get-sum")]
    parts: list[dict[str, Any]] = [{"functionCall": {"name": "_1pw__image", "args": {}}}]
    fake = FakeProvider(
        json_response(200, generated(parts)), json_response(200, generated([{"text": "done"}]))
    )
    gemini = model(fake, sleeps)
    first = await gemini.invoke(ASK, tools)

    declared = [d["name"] for d in fake.body()["tools"][0]["functionDeclarations"]]
    assert declared[0] == "_1pw__image"
    assert declared[1].startswith("_3d-render_")  # `_3d-render` is another tool's own name
    assert declared[2:] == ["_3d-render", "get-sum"]
    assert all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:-]{0,63}", name) for name in declared)
    assert [c.name for c in first.tool_calls] == ["1pw__image"]  # the tool's own name

    foreign = AssistantMessage(
        tool_calls=(ToolCall(id="toolu_1", name="3d-render"),), provider="anthropic"
    )
    history = [
        *ASK,
        first,
        ToolMessage(tool_call_id=first.tool_calls[0].id, name="1pw__image", content="png"),
        foreign,
        ToolMessage(tool_call_id="toolu_1", name="3d-render", content="ok"),
    ]
    await gemini.invoke(history, tools)
    contents = fake.body()["contents"]
    assert contents[1] == {"role": "model", "parts": parts}
    assert contents[2]["parts"][0]["functionResponse"]["name"] == "_1pw__image"
    assert contents[3]["parts"][0]["functionCall"]["name"] == declared[1]
    assert contents[4]["parts"][0]["functionResponse"]["name"] == declared[1]
