"""A call's arguments that Python's `json` reads but that are no JSON a model may write (`NaN`,
`Infinity`, `1e999`, nesting deeper than a tool's result may) are refused on every provider,
streamed or whole, as arguments that are not a JSON object are: the tool is not run, the model
is told why, and the call goes back to it as its API takes it. JSON too deep to read at all is
the provider's answer that could not be read (a `ModelResponseError`), never a RecursionError."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agent import (
    AgentItem,
    AgentResult,
    EngineRequest,
    EngineResponse,
    ToolsAgent,
    UserMessage,
)
from agent.errors import ModelResponseError
from agent.model_json import MAX_DEPTH
from toolkits.nesting import MAX_DEPTH as RESULT_DEPTH

from .support import FakeProvider, Sleeps, sse_response
from .test_replayed_calls import CALC, PROVIDERS, TEXT_ARGUMENTS, Provider, responses_answer

pytestmark = pytest.mark.anyio

PLACE = '"@ARGS@"'
"""Where a test's arguments go in an answer written as JSON text."""


def deep(levels: int) -> str:
    """`{"expression": [[...]]}`: an arguments object nested `levels` levels in all."""
    return '{"expression": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"


BAD = {
    "NaN": ('{"expression": NaN}', "not valid JSON (NaN is not a JSON number)"),
    "Infinity": ('{"expression": Infinity}', "not valid JSON (Infinity is not a JSON number)"),
    "-Infinity": ('{"expression": -Infinity}', "not valid JSON (-Infinity is not a JSON number)"),
    "1e999": ('{"expression": 1e999}', "not valid JSON ("),
    "101 levels": (deep(101), "nested too deeply (101 levels; at most 100)"),
}


def written(provider: Provider, arguments: str, text: str = "") -> bytes:
    """A whole answer of `provider` calling the calculator with `arguments` (JSON text) as
    a server that writes what Python's `json` writes would send it: `NaN` and all."""
    if not arguments:
        return json.dumps(provider.answer([], text)).encode()
    if provider.name in TEXT_ARGUMENTS:  # arguments are a string there
        return json.dumps(provider.answer([("call_1", "calculator", arguments)])).encode()
    answer = json.dumps(provider.answer([("call_1", "calculator", "@ARGS@")]))
    return answer.replace(PLACE, arguments).encode()


def answered(body: bytes) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "application/json"}, content=body)


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_arguments_no_json_has_are_refused_and_the_model_told_why(
    provider: Provider, bad: str, sleeps: Sleeps
) -> None:
    arguments, why = BAD[bad]
    fake = FakeProvider(
        answered(written(provider, arguments)), answered(written(provider, "", "Done."))
    )
    agent = ToolsAgent(model=provider.model(fake, sleeps), tools=[CALC])
    items = [AgentItem(prompt="Add.")]
    outcome = await agent.step(items)
    while isinstance(outcome, EngineRequest):
        assert outcome.actions == []  # the agent answered the call itself: no tool runs it
        response = EngineResponse(action_responses=[], metadata=outcome.metadata)
        outcome = await agent.step(items, response)
    assert isinstance(outcome, AgentResult)
    assert outcome.items[0].output == "Done."
    # What goes back to the model is JSON (no NaN: `json_body` refused it with a ValueError
    # before) that its API takes: the call's arguments an empty object where they are one.
    sent = fake.requests[-1].content.decode()
    json.loads(sent, parse_constant=lambda name: pytest.fail(f"{name} sent"))
    assert provider.problems(json.loads(sent)) == []
    assert f"Error: the arguments for 'calculator' were {why}" in sent
    assert "Call it again with valid JSON arguments." in sent


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_arguments_as_deep_as_a_result_may_be_are_taken(
    provider: Provider, sleeps: Sleeps
) -> None:
    fake = FakeProvider(answered(written(provider, deep(MAX_DEPTH))))
    answer = await provider.model(fake, sleeps).invoke([UserMessage(content="Add.")], [CALC])
    [call] = answer.tool_calls
    assert call.invalid_arguments is None
    assert call.arguments == json.loads(deep(MAX_DEPTH))


def test_arguments_may_nest_as_deep_as_a_tool_result() -> None:
    assert MAX_DEPTH == RESULT_DEPTH  # the agent may not import toolkits: one rule, two places


def openai_stream(arguments: str) -> httpx.Response:
    head = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "calculator"}}
    cut = len(arguments) // 2
    events: list[tuple[str | None, Any]] = [
        (None, {"choices": [{"index": 0, "delta": {"tool_calls": [head]}}]}),
        *(
            (None, {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, **part}]}}]})
            for part in (
                {"function": {"arguments": arguments[:cut]}},
                {"function": {"arguments": arguments[cut:]}},
            )
        ),
        (None, {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        (None, "[DONE]"),
    ]
    return sse_response(events)


def anthropic_stream(arguments: str) -> httpx.Response:
    block: dict[str, Any] = {"type": "tool_use", "id": "toolu_1", "name": "calculator", "input": {}}
    cut = len(arguments) // 2
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"id": "msg_1", "model": "claude", "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": block},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": part},
            }
            for part in (arguments[:cut], arguments[cut:])
        ),
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    ]
    return sse_response([(event["type"], event) for event in events])


def gemini_stream(arguments: str) -> httpx.Response:
    call = {"functionCall": {"name": "calculator", "args": "@ARGS@"}}
    chunk = {"candidates": [{"content": {"role": "model", "parts": [call]}}]}
    last: dict[str, Any] = {
        "candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "STOP"}]
    }
    data = json.dumps(chunk).replace(PLACE, arguments)
    return sse_response([(None, data), (None, last)])


def responses_stream(arguments: str) -> httpx.Response:
    done = responses_answer([("call_1", "calculator", arguments)])
    item = done["output"][-1]
    cut = len(arguments) // 2
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 1,
         "item": {**item, "status": "in_progress", "arguments": ""}},
        *({"type": "response.function_call_arguments.delta", "item_id": item["id"],
           "output_index": 1, "delta": part} for part in (arguments[:cut], arguments[cut:])),
        {"type": "response.output_item.done", "output_index": 1, "item": item},
        {"type": "response.completed", "response": done},
    ]  # fmt: skip
    return sse_response([(event["type"], event) for event in events])


STREAMS = {
    "openai": openai_stream,
    "openai-responses": responses_stream,
    "anthropic": anthropic_stream,
    "gemini": gemini_stream,
}


@pytest.mark.parametrize("bad", list(BAD))
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_streamed_arguments_no_json_has_are_refused(
    provider: Provider, bad: str, sleeps: Sleeps
) -> None:
    arguments, _ = BAD[bad]
    fake = FakeProvider(STREAMS[provider.name](arguments))
    model = provider.model(fake, sleeps)
    answer = await model.invoke([UserMessage(content="Add.")], [CALC], on_token=_ignored)
    [call] = answer.tool_calls
    assert (call.name, call.arguments) == ("calculator", {})
    assert call.invalid_arguments is not None


async def _ignored(_: str) -> None:
    pass


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_arguments_too_deep_for_pythons_reader_are_refused_or_unreadable(
    provider: Provider, streamed: bool, sleeps: Sleeps
) -> None:
    """As text (OpenAI's arguments, Anthropic's streamed `input_json_delta`) they are the
    call's refused arguments; inside the answer's own JSON, the answer cannot be read."""
    arguments = deep(5000)
    given = (
        STREAMS[provider.name](arguments) if streamed else answered(written(provider, arguments))
    )
    model = provider.model(FakeProvider(given), sleeps)
    as_text = provider.name in TEXT_ARGUMENTS or (provider.name == "anthropic" and streamed)
    ask = [UserMessage(content="Add.")]
    if not as_text:
        with pytest.raises(ModelResponseError, match=r"(answer is|stream event) nested too deeply"):
            await model.invoke(ask, [CALC], on_token=_ignored if streamed else None)
        return
    answer = await model.invoke(ask, [CALC], on_token=_ignored if streamed else None)
    [call] = answer.tool_calls
    assert call.arguments == {}
    assert call.invalid_arguments == arguments


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_an_answer_too_deep_for_a_stored_run_to_hold_is_not_taken(
    provider: Provider, streamed: bool, sleeps: Sleeps
) -> None:
    """Arguments past the limit are refused, but an answer that keeps them as an object
    (Anthropic's `input`, Gemini's `args`) nested past what a stored run can read back is
    no answer: the run store's reader stops at 200 levels."""
    arguments = deep(300)
    given = (
        STREAMS[provider.name](arguments) if streamed else answered(written(provider, arguments))
    )
    model = provider.model(FakeProvider(given), sleeps)
    ask = [UserMessage(content="Add.")]
    if provider.name in TEXT_ARGUMENTS or (provider.name == "anthropic" and streamed):
        answer = await model.invoke(ask, [CALC], on_token=_ignored if streamed else None)
        assert answer.tool_calls[0].invalid_arguments == arguments  # text: kept as text
        return
    with pytest.raises(ModelResponseError, match=r"nested too deeply \(30\d levels; at most 128\)"):
        await model.invoke(ask, [CALC], on_token=_ignored if streamed else None)


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_a_lone_surrogate_in_arguments_is_the_replacement_character(
    provider: Provider, streamed: bool, sleeps: Sleeps
) -> None:
    """`"\\ud800"` (half an emoji) read as a str that no UTF-8 encoder takes: the run could
    not be stored, and a Python MCP server's reader dropped the call, which then waited out
    its timeout. It is U+FFFD, as it is for tool results."""
    arguments = '{"expression": "a\\ud800b", "\\udc00": "\\ud83d\\ude00"}'
    given = (
        STREAMS[provider.name](arguments) if streamed else answered(written(provider, arguments))
    )
    model = provider.model(FakeProvider(given), sleeps)
    ask = [UserMessage(content="Add.")]
    answer = await model.invoke(ask, [CALC], on_token=_ignored if streamed else None)
    [call] = answer.tool_calls
    assert call.arguments == {"expression": "a\ufffdb", "\ufffd": "\U0001f600"}  # a pair is one
    answer.model_dump_json()  # a stored run holds it


@pytest.mark.parametrize("provider", PROVIDERS, ids=lambda p: p.name)
async def test_a_lone_surrogate_in_a_models_text_is_the_replacement_character(
    provider: Provider, sleeps: Sleeps
) -> None:
    body = written(provider, "", "half \\ud83d an emoji").replace(b"\\\\ud83d", b"\\ud83d")
    model = provider.model(FakeProvider(answered(body)), sleeps)
    answer = await model.invoke([UserMessage(content="Hi.")], [CALC])
    assert answer.content == "half \ufffd an emoji"
    answer.model_dump_json()
