"""Native structured output on Anthropic: the answer's schema as `output_config.format`
beside the tools, fitted to what its grammar holds, the answer read from the text block
(whole or streamed), and the models or schemas it cannot take refused before a request, or
the API's 400 said with what to do."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, JsonValue

from agent import ModelConfigError, ModelHTTPError, OutputSchema, UserMessage
from agent.models import AnthropicModel, ModelSettings
from agent.native_output import native_output
from gateway import ConfigError, open_gateway
from gateway.config import parse_config

from .support import FakeProvider, Sleeps, Tokens, json_response, retry_policy, sse_response
from .test_anthropic import message
from .test_native_output import STRICT_TOTAL, native

pytestmark = pytest.mark.anyio


def claude(fake: FakeProvider, sleeps: Sleeps, name: str = "claude-sonnet-4-5", **kw: Any) -> Any:
    return AnthropicModel(
        name, api_key="sk-ant-1", http_client=fake.client(), retry=retry_policy(sleeps), **kw
    )


def text(answer: str) -> dict[str, Any]:
    return message([{"type": "text", "text": answer}], "end_turn")


async def test_the_schema_goes_as_output_config_beside_the_tools_and_the_text_is_the_answer(
    sleeps: Sleeps,
) -> None:
    calls = message(
        [
            {"type": "text", "text": "Let me work it out."},
            {"type": "tool_use", "id": "toolu_01", "name": "calculator",
             "input": {"expression": "17 * 25"}},
        ]
    )  # fmt: skip
    fake = FakeProvider(
        json_response(200, calls), json_response(200, text('{"total": 425, "currency": null}'))
    )
    result = await native(claude(fake, sleeps)).run("shop", "What do 17 shirts at 25 cost?")
    assert result.error is None
    assert result.structured == {"total": 425}  # the null strict output needed is left out
    for n in (0, 1):  # the call that used the tool, and the one that answered
        body = fake.body(n)
        assert body["output_config"] == {"format": {"type": "json_schema", "schema": STRICT_TOTAL}}
        assert [t["name"] for t in body["tools"]] == ["calculator"]  # no final_result
    assert fake.body(1)["messages"][-1]["content"][0]["content"] == "425"
    assert "anthropic-beta" not in fake.requests[0].headers  # generally available: no beta


async def test_a_streamed_answer_is_read_from_its_text_deltas(sleeps: Sleeps) -> None:
    pieces = ['{"total"', ": 3, ", '"currency": "EUR"}']
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {
            "id": "msg_01", "type": "message", "role": "assistant", "content": [],
            "model": "claude-sonnet-4-5-20250929", "stop_reason": None,
            "usage": {"input_tokens": 25, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        *(
            ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": piece}})
            for piece in pieces
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 12}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    fake = FakeProvider(sse_response(events), sse_response(events), sse_response(events))
    model = claude(fake, sleeps, settings=ModelSettings(stream=True))
    result = await native(model).run("shop", "How much?")
    assert result.structured == {"total": 3, "currency": "EUR"}
    tokens = Tokens()
    with native_output(STRICT_TOTAL):
        answer = await model.invoke([UserMessage(content="How much?")], [], on_token=tokens)
    assert (answer.content, tokens.received) == ("".join(pieces), pieces)
    assert fake.body()["stream"] is True
    assert fake.body()["output_config"]["format"]["schema"] == STRICT_TOTAL
    await model.invoke([UserMessage(content="How much?")], [])  # outside the block
    assert "output_config" not in fake.body()


CONSTRAINED: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "total": {"type": "number", "minimum": 0, "description": "In euros."},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$", "maxLength": 3},
        "site": {"type": "string", "format": "uri"},
        "sku": {"type": "string", "format": "ean13"},
        "lines": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["total", "code", "site", "sku", "lines", "tags"],
}


async def test_constraints_its_grammar_does_not_hold_are_said_and_still_checked(
    sleeps: Sleeps,
) -> None:
    below = (
        '{"total": -5, "code": "EUR", "site": "https://a.eu", "sku": "1", "lines": ["a", "b"],'
        ' "tags": ["x"]}'
    )
    fake = FakeProvider(
        json_response(200, text(below)), json_response(200, text(below.replace("-5", "5")))
    )
    output = OutputSchema.from_json_schema(CONSTRAINED)
    result = await native(claude(fake, sleeps), output, output_retries=1).run("shop", "?")
    assert result.structured == json.loads(below.replace("-5", "5"))
    sent = fake.body(0)["output_config"]["format"]["schema"]["properties"]
    assert sent["total"] == {"type": "number", "description": "In euros.\n\n{minimum: 0}"}
    assert sent["code"] == {
        "type": "string",
        "description": '{pattern: "^[A-Z]{3}$", maxLength: 3}',
    }
    assert sent["site"] == {"type": "string", "format": "uri"}
    assert sent["sku"] == {"type": "string", "description": '{format: "ean13"}'}
    assert sent["lines"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "{minItems: 2}",
    }
    assert sent["tags"] == {"type": "array", "items": {"type": "string"}, "minItems": 1}
    told = fake.body(1)["messages"][-1]["content"][0]["text"]
    assert "-5 is less than the minimum of 0" in told


class Node(BaseModel):
    name: str
    children: list[Node] = []


async def test_a_recursive_schema_is_refused_before_a_request(sleeps: Sleeps) -> None:
    fake = FakeProvider()  # any request would fail the test
    with pytest.raises(ModelConfigError, match=r"is recursive \('#/\$defs/Node' refers back"):
        await native(claude(fake, sleeps), OutputSchema.from_model(Node)).run("shop", "?")
    assert fake.requests == []


async def test_config_refuses_a_schema_anthropic_cannot_hold_and_takes_it_elsewhere() -> None:
    tree: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                "required": ["kids"],
            }
        },
    }

    def agent(model: str) -> dict[str, Any]:
        return {"model": model, "output_schema": tree, "output_mode": "native"}

    with pytest.raises(ConfigError, match="'anthropic:claude-opus-4-5': the schema is recursive"):
        parse_config({"agents": {"shop": agent("anthropic:claude-opus-4-5")}})
    looped: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["next"],
    }
    with pytest.raises(ConfigError, match=r"recursive \('#' refers back to its root\)"):
        parse_config(
            {"agents": {"shop": {**agent("anthropic:claude-haiku-4-5"), "output_schema": looped}}}
        )
    pairs: dict[str, JsonValue] = {
        "type": "object",
        "properties": {"at": {"enum": [[0, 0], [1, 1]]}},
        "required": ["at"],
    }
    with pytest.raises(ConfigError, match="at 'at' has an enum of objects or arrays"):
        parse_config(
            {"agents": {"shop": {**agent("anthropic:claude-haiku-4-5"), "output_schema": pairs}}}
        )
    config = parse_config({"agents": {"shop": agent("openai:gpt-4.1-mini")}})  # OpenAI can
    with pytest.raises(ConfigError, match=r"model anthropic:claude-opus-4-5: .* is recursive"):
        async with open_gateway(config, model="anthropic:claude-opus-4-5"):
            pass


async def test_the_apis_400_for_a_model_without_structured_outputs_says_what_to_do(
    sleeps: Sleeps,
) -> None:
    refused = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "output_config.format: Extra inputs are not permitted",
        },
        "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy",
    }
    fake = FakeProvider(json_response(400, refused))
    with pytest.raises(ModelHTTPError) as caught, native_output(STRICT_TOTAL):
        await claude(fake, sleeps, "claude-opus-4-1").invoke([UserMessage(content="?")], [])
    error = caught.value
    assert error.status_code == 400
    assert str(error) == (
        "anthropic:claude-opus-4-1: HTTP 400: output_config.format: Extra inputs are not "
        "permitted (output_mode 'native' sends output_config.format, which only Claude models "
        "with structured outputs take, and only a schema their grammar can hold: use "
        "output_mode = 'tool' otherwise)"
    )
    assert len(fake.requests) == 1  # not retried

    keys = "tools.0.custom.input_schema.properties: Property keys should match pattern"
    other = {"type": "error", "error": {"type": "invalid_request_error", "message": keys}}
    fake = FakeProvider(json_response(400, other))
    with pytest.raises(ModelHTTPError) as caught, native_output(STRICT_TOTAL):
        await claude(fake, sleeps).invoke([UserMessage(content="?")], [])
    assert str(caught.value) == f"anthropic:claude-sonnet-4-5: HTTP 400: {keys}"  # no hint
