"""Argument keys Anthropic refuses (`filter[id]`, `$top`, `名前`, `a b`, over 64 characters):
declared under keys it takes, and the model's arguments given the tool's own keys back.

Anthropic answers 400 to the whole request ("tools.N.custom.input_schema.properties: Property
keys should match pattern '^[a-zA-Z0-9_.-]{1,64}$'") when one tool has such a top-level key;
keys deeper in are not checked.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest

from agent.messages import AssistantMessage, ToolCall, ToolDefinition, ToolMessage, UserMessage
from agent.models import AnthropicModel
from agent.models.anthropic_schema import anthropic_input_schema, anthropic_property_keys

from .support import FakeProvider, Sleeps, Tokens, json_response, retry_policy, sse_response

PROPERTY_KEY = re.compile(r"[a-zA-Z0-9_.-]{1,64}")
LONG = "p" * 70
LONG_DECLARED = "p" * 55 + "_" + hashlib.sha256(LONG.encode()).hexdigest()[:8]
ODD_PROPERTIES: dict[str, Any] = {
    "filter[id]": {"type": "string", "description": "Only this app."},
    "$top": {"type": "integer"},
    "名前": {"type": "string"},
    "a b": {"type": "string"},
    LONG: {"type": "string"},
    "ok.dot-dash_1": {"type": "string"},
    "nested": {"type": "object", "properties": {"x[y]": {"type": "string"}}},
}
ODD_KEYS = ToolDefinition(
    name="list_apps",
    source_node="appstore",
    description="List apps.",
    input_schema={
        "type": "object",
        "properties": ODD_PROPERTIES,
        "required": ["filter[id]", "ok.dot-dash_1"],
    },
)
PLAIN = ToolDefinition(
    name="echo",
    source_node="everything",
    description="Echo.",
    input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
)
OWN_ARGUMENTS: dict[str, Any] = {
    "filter[id]": "7",
    "$top": 5,
    "名前": "値",
    "a b": "c",
    LONG: "long",
    "ok.dot-dash_1": "fine",
    "nested": {"x[y]": "kept"},
}


def refused_keys(body: dict[str, Any]) -> list[str]:
    """The top-level property keys the Messages API refuses, in the request's tools."""
    return [
        f"tools.{i}: {key!r}"
        for i, tool in enumerate(body["tools"])
        for key in tool["input_schema"]["properties"]
        if not PROPERTY_KEY.fullmatch(key)
    ]


def tool_use_events(tool_id: str, name: str, arguments: str) -> list[tuple[str | None, Any]]:
    start: dict[str, Any] = {"type": "message_start", "message": {
        "id": "msg_01", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 40, "output_tokens": 1},
    }}  # fmt: skip
    block: dict[str, Any] = {"type": "tool_use", "id": tool_id, "name": name, "input": {}}
    return [
        ("message_start", start),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "input_json_delta",
                                           "partial_json": arguments}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                           "usage": {"output_tokens": 20}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip


def done() -> dict[str, Any]:
    return {
        "id": "msg_02", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929", "content": [{"type": "text", "text": "done"}],
        "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": 60, "output_tokens": 2},
    }  # fmt: skip


def claude(fake: FakeProvider, sleeps: Sleeps) -> AnthropicModel:
    return AnthropicModel(
        "claude-sonnet-4-5", api_key="sk-ant-test", http_client=fake.client(),
        retry=retry_policy(sleeps),
    )  # fmt: skip


def test_refused_keys_are_declared_under_keys_the_api_takes() -> None:
    before = json.dumps(ODD_KEYS.input_schema)
    schema = anthropic_input_schema(ODD_KEYS.input_schema)
    properties = schema["properties"]
    assert all(PROPERTY_KEY.fullmatch(key) for key in properties)
    assert len(properties) == 7
    assert properties["filter_id_"] == {
        "type": "string",
        "description": 'Only this app.\n\nThe tool\'s own name for this argument is "filter[id]".',
    }
    assert properties["_top"]["description"] == 'The tool\'s own name for this argument is "$top".'
    assert properties["a_b"]["type"] == "string"
    assert properties["__"]["description"] == 'The tool\'s own name for this argument is "名前".'
    assert properties[LONG_DECLARED]["type"] == "string"  # its head and a hash of it
    assert properties["ok.dot-dash_1"] == {"type": "string"}  # a key the API takes stays
    # Keys deeper in are not checked by the API, and are the tool's own.
    assert properties["nested"] == {"type": "object", "properties": {"x[y]": {"type": "string"}}}
    assert schema["required"] == ["filter_id_", "ok.dot-dash_1"]
    # The tool's own schema is not changed.
    assert json.dumps(ODD_KEYS.input_schema) == before


def test_keys_that_would_meet_stay_apart_and_come_back_to_their_own() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a b": {}, "a_b": {}, "a-b": {}, "a/b": {}, "": {}, "ß": {}, "é": {},
            LONG: {}, LONG + "q": {}, "fl ag": True,
        },
    }  # fmt: skip
    declared = anthropic_input_schema(schema)["properties"]
    assert len(declared) == 10
    assert all(PROPERTY_KEY.fullmatch(key) for key in declared)
    assert {"a_b", "a-b"} <= set(declared)  # taken as they are: the others go round them
    # `true` (any value) is `{}`, with room to name the tool's own key.
    assert declared["fl_ag"] == {
        "description": 'The tool\'s own name for this argument is "fl ag".'
    }
    keys = anthropic_property_keys(schema)
    assert keys is not None
    written = {key: index for index, key in enumerate(declared)}
    assert keys.restore(written) == {key: index for index, key in enumerate(schema["properties"])}
    assert keys.declared(keys.restore(written)) == written
    assert anthropic_property_keys(PLAIN.input_schema) is None
    # Keys brought in by a root `oneOf` are checked as well.
    either: dict[str, Any] = {
        "oneOf": [{"properties": {"$filter": {}}}, {"properties": {"id": {}}}]
    }
    assert set(anthropic_input_schema(either)["properties"]) == {"_filter", "id"}
    either_keys = anthropic_property_keys(either)
    assert either_keys is not None
    assert either_keys.restore({"_filter": "x"}) == {"$filter": "x"}


@pytest.mark.anyio
async def test_the_tool_is_called_with_its_own_keys_and_the_others_keep_working(
    sleeps: Sleeps,
) -> None:
    declared = json.dumps({
        "filter_id_": "7", "_top": 5, "__": "値", "a_b": "c", LONG_DECLARED: "long",
        "ok.dot-dash_1": "fine", "nested": {"x[y]": "kept"},
    })  # fmt: skip
    fake = FakeProvider(
        sse_response(tool_use_events("toolu_01", "list_apps", declared)),
        json_response(200, done()),
    )
    model = claude(fake, sleeps)
    tools = [PLAIN, ODD_KEYS]
    asked = [UserMessage(content="List app 7.")]
    first = await model.invoke(asked, tools, on_token=Tokens())

    assert refused_keys(fake.body(0)) == []
    assert fake.body(0)["tools"][0]["input_schema"] == PLAIN.input_schema
    assert first.tool_calls == (ToolCall(id="toolu_01", name="list_apps", arguments=OWN_ARGUMENTS),)
    result = ToolMessage(tool_call_id="toolu_01", name="list_apps", content="app 7")
    await model.invoke([*asked, first, result], tools)
    # The call goes back to Anthropic as it wrote it, under the keys it was told.
    replayed = fake.body(1)["messages"][1]["content"][0]
    assert replayed["input"]["filter_id_"] == "7"
    assert refused_keys(fake.body(1)) == []


@pytest.mark.anyio
async def test_a_call_another_provider_made_goes_to_anthropic_under_the_declared_keys(
    sleeps: Sleeps,
) -> None:
    foreign = AssistantMessage(
        tool_calls=(ToolCall(id="call_1", name="list_apps", arguments={"filter[id]": "7"}),),
        provider="openai",
    )
    fake = FakeProvider(json_response(200, done()))
    history = [
        UserMessage(content="List app 7."),
        foreign,
        ToolMessage(tool_call_id="call_1", name="list_apps", content="app 7"),
    ]
    await claude(fake, sleeps).invoke(history, [ODD_KEYS])
    sent = fake.body()["messages"][1]["content"][0]
    assert sent["input"] == {"filter_id_": "7"}
