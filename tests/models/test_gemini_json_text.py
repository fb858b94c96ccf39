"""What Gemini's schema subset cannot say, declared as JSON text and read back: a tool whose
arguments are a free-form object, and values a schema leaves open (`{}`, `true`, an array
without `items`, a recursive `$ref` where it is cut)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.messages import ToolDefinition, UserMessage
from agent.models import GeminiModel
from agent.models.gemini_schema import gemini_json_text_fields, gemini_parameters

from .support import FakeProvider, Sleeps, Tokens, json_response, raw_of, retry_policy, sse_response
from .test_schema_edge_cases import gemini_refusals

ASK = [UserMessage(content="Go.")]
TREE: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
            },
            "required": ["name"],
        }
    },
    "properties": {"tree": {"$ref": "#/$defs/Node"}},
    "required": ["tree"],
}
OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {
        "list": {"type": "array"},
        "mixed": {"type": ["array", "null"]},
        "anything": {},
        "flag": True,
        "either": {"anyOf": [{"type": "integer"}, {}], "description": "A number or anything."},
        "mode": {"enum": ["a", 1, None]},
    },
}


def tool(name: str, schema: dict[str, Any]) -> ToolDefinition:
    return ToolDefinition(name=name, description=name, source_node="n", input_schema=schema)


def generated(name: str, args: dict[str, Any]) -> dict[str, Any]:
    parts = [{"functionCall": {"name": name, "args": args}}]
    return {
        "candidates": [
            {"content": {"parts": parts, "role": "model"}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 5},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "resp-1",
    }


def gemini(fake: FakeProvider, sleeps: Sleeps) -> GeminiModel:
    return GeminiModel(
        "gemini-2.5-flash", api_key="AIza-test", http_client=fake.client(),
        retry=retry_policy(sleeps),
    )  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_free_form_root_is_one_json_text_parameter_read_back_into_the_arguments(
    sleeps: Sleeps, streamed: bool
) -> None:
    anything = tool("anything", {"type": "object", "additionalProperties": True})
    env = tool(
        "set_env",
        {"type": "object", "additionalProperties": {"type": "string"}, "required": ["HOME"]},
    )
    nothing = tool("ping", {"type": "object"})  # the usual way to say "no arguments"
    args = {"arguments": '{"anything": {"goes": [1, 2]}, "n": null}'}
    answer = generated("anything", args)
    fake = FakeProvider(sse_response([(None, answer)]) if streamed else json_response(200, answer))
    message = await gemini(fake, sleeps).invoke(
        ASK, [anything, env, nothing], on_token=Tokens() if streamed else None
    )

    declared = fake.body()["tools"][0]["functionDeclarations"]
    assert declared[0]["parameters"] == {
        "type": "object",
        "properties": {
            "arguments": {
                "type": "string",
                "description": "The tool's arguments. (A JSON object, written as JSON text.)",
            }
        },
    }
    assert declared[1]["parameters"]["required"] == ["arguments"]
    assert declared[1]["parameters"]["properties"]["arguments"]["description"] == (
        "The tool's arguments. (A JSON object, written as JSON text, whose values are of type"
        " string, with the keys `HOME`.)"
    )
    assert "parameters" not in declared[2]
    assert all(gemini_refusals(d.get("parameters")) == [] for d in declared)
    [call] = message.tool_calls
    assert call.arguments == {"anything": {"goes": [1, 2]}, "n": None}
    assert raw_of(message)["parts"][0]["functionCall"]["args"] == args  # Gemini's own, to replay


def test_a_free_form_root_gemini_wrote_no_object_for_is_left_for_the_tool_to_refuse() -> None:
    fields = gemini_json_text_fields({"type": "object", "additionalProperties": True})
    assert fields is not None
    assert fields.decode({"arguments": "[1, 2]"}) == {"arguments": "[1, 2]"}
    assert fields.decode({"arguments": "{not json"}) == {"arguments": "{not json"}
    # JSON no reader after this one takes (`NaN`, nesting past what `json` reads) is no JSON.
    for written in ('{"a": NaN}', '{"a": 1e999}', '{"a": ' + "[" * 5000 + "]" * 5000 + "}"):
        assert fields.decode({"arguments": written}) == {"arguments": written}
    assert fields.decode({}) == {}  # nothing was required: no arguments


def test_json_text_nested_deeper_than_python_reads_is_left_as_text() -> None:
    deep = "[" * 3_000
    fields = gemini_json_text_fields({"type": "object", "additionalProperties": True})
    assert fields is not None
    assert fields.decode({"arguments": deep}) == {"arguments": deep}
    open_fields = gemini_json_text_fields(OPEN)
    assert open_fields is not None
    assert open_fields.decode({"anything": deep}) == {"anything": deep}


@pytest.mark.anyio
async def test_values_the_schema_leaves_open_can_hold_objects_and_arrays(sleeps: Sleeps) -> None:
    cut: dict[str, Any] = {"name": "c", "children": [{"name": "d", "children": []}]}
    args: dict[str, Any] = {
        "tree": {"name": "a", "children": [{"name": "b", "children": [json.dumps(cut)]}]},
    }
    fake = FakeProvider(json_response(200, generated("save_tree", args)))
    message = await gemini(fake, sleeps).invoke(ASK, [tool("save_tree", TREE)])

    [declared] = fake.body()["tools"][0]["functionDeclarations"]
    assert gemini_refusals(declared["parameters"]) == []
    level2 = declared["parameters"]["properties"]["tree"]["properties"]["children"]["items"]
    assert level2["properties"]["children"]["items"] == {
        "type": "string",
        "description": "Any JSON value, written as JSON text.",
    }
    [call] = message.tool_calls
    assert call.arguments == {"tree": {"name": "a", "children": [{"name": "b", "children": [cut]}]}}


def test_open_values_are_json_text_of_any_value() -> None:
    parameters = gemini_parameters(OPEN)
    assert parameters is not None
    assert gemini_refusals(parameters) == []
    props = parameters["properties"]
    any_text = {"type": "string", "description": "Any JSON value, written as JSON text."}
    assert props["list"] == {"type": "array", "items": any_text}
    assert props["mixed"] == {"type": "array", "items": any_text, "nullable": True}
    assert props["anything"] == props["flag"] == any_text
    # One alternative is any value: so is the whole.
    assert props["either"] == {
        "type": "string",
        "description": "A number or anything. (Any JSON value, written as JSON text.)",
    }
    assert props["mode"]["description"] == 'JSON text of one of "a", 1, null.'

    fields = gemini_json_text_fields(OPEN)
    assert fields is not None
    written = {
        "list": ["1", '"a"', '{"b": null}', "plain words", "NaN"],
        "mixed": None,
        "anything": '{"deep": [{"x": 1}]}',
        "flag": "true",
        "either": "7",
        "mode": "a",
    }
    assert fields.decode(written) == {
        # Text that is no JSON is the string itself (NaN is Python's, not JSON's).
        "list": [1, "a", {"b": None}, "plain words", "NaN"],
        "mixed": None,
        "anything": {"deep": [{"x": 1}]},
        "flag": True,
        "either": 7,
        "mode": "a",
    }
