"""Schemas real servers list that a provider refuses as written, translated for each one.

The refusals checked here are the providers' documented rules, as their 400 answers state
them: OpenAI ("schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/
'const'/'not' at the top level", "array schema missing items"), Anthropic ("input_schema does
not support oneOf, allOf, or anyOf at the top level") and Gemini's OpenAPI subset ("should be
non-empty for OBJECT type", "only allowed for STRING type", unknown field names).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest

from agent.messages import ToolDefinition
from agent.models.gemini_schema import gemini_json_text_fields
from agent.models.schema import (
    anthropic_input_schema,
    described,
    gemini_parameters,
    openai_parameters,
    unexpressed,
)

from .conftest import load_tools

SERVERS = ("server-everything", "server-filesystem", "mcp-server-git", "mcp-python-sdk-pydantic")
EDGE = load_tools("schema-edge-cases")
EVERY = [*EDGE, *(tool for server in SERVERS for tool in load_tools(server))]
BY_NAME = {tool.name: tool for tool in EDGE}


def schema_of(name: str) -> dict[str, Any]:
    return dict(BY_NAME[name].input_schema)


def subschemas(node: Any) -> Iterator[dict[str, Any]]:
    """`node` and every schema inside it."""
    if not isinstance(node, dict):
        return
    schema = cast(dict[str, Any], node)
    yield schema
    for key in ("properties", "patternProperties", "$defs"):
        for sub in schema.get(key, {}).values():
            yield from subschemas(sub)
    for key in ("items", "additionalProperties", "not", "if", "then", "else"):
        yield from subschemas(schema.get(key))
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        for sub in schema.get(key, []):
            yield from subschemas(sub)


def is_array(node: dict[str, Any]) -> bool:
    kind = node.get("type")
    return kind == "array" or (isinstance(kind, list) and "array" in kind)


def openai_refusals(parameters: dict[str, Any]) -> list[str]:
    refused = [] if parameters.get("type") == "object" else ["root is not an object"]
    at_root = ("oneOf", "anyOf", "allOf", "enum", "const", "not")
    refused += [f"{key} at the root" for key in at_root if key in parameters]
    arrays = (node for node in subschemas(parameters) if is_array(node))
    return refused + [f"array without items: {node}" for node in arrays if "items" not in node]


def anthropic_refusals(schema: dict[str, Any]) -> list[str]:
    refused = [] if schema.get("type") == "object" else ["root is not an object"]
    return refused + [f"{k} at the root" for k in ("oneOf", "anyOf", "allOf") if k in schema]


GEMINI_FIELDS = {
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
}  # fmt: skip


def gemini_refusals(parameters: dict[str, Any] | None) -> list[str]:
    if parameters is None:
        return []
    refused = [] if parameters.get("type") == "object" else ["root is not an OBJECT"]
    for node in subschemas(parameters):
        kind = node.get("type")
        refused += [f"unknown field {k}" for k in set(node) - GEMINI_FIELDS]
        if kind is not None and not isinstance(kind, str):
            refused.append(f"type is not one name: {kind}")
        if kind == "object" and not node.get("properties"):
            refused.append(f"OBJECT without properties: {node}")
        if "properties" in node and kind != "object":
            refused.append(f"properties beside type {kind}")
        if "enum" in node and kind != "string":
            refused.append(f"enum beside type {kind}")
        if kind == "array" and not isinstance(node.get("items"), dict):
            refused.append(f"ARRAY without items: {node}")
        if set(node.get("required", [])) - set(node.get("properties", {})):
            refused.append(f"required names no property: {node}")
    return refused


@pytest.mark.parametrize("tool", EVERY, ids=lambda t: t.name)
def test_every_provider_takes_every_schema(tool: ToolDefinition) -> None:
    assert openai_refusals(openai_parameters(tool.input_schema)[0]) == []
    assert anthropic_refusals(anthropic_input_schema(tool.input_schema)) == []
    assert gemini_refusals(gemini_parameters(tool.input_schema)) == []
    assert unexpressed(tool.input_schema) == ()


def test_a_root_oneof_of_required_names_becomes_optional_properties_and_a_sentence() -> None:
    schema = schema_of("get_issue")
    properties = {
        "identifier": {"type": "string", "description": "Issue identifier, e.g. PROJ-12"},
        "url": {"type": "string", "format": "uri"},
    }
    expected = {"type": "object", "properties": properties, "additionalProperties": False}
    assert anthropic_input_schema(schema) == expected
    assert openai_parameters(schema) == (expected, False)  # an optional property: not strict
    gemini = gemini_parameters(schema)
    assert gemini is not None
    assert set(gemini["properties"]) == {"identifier", "url"}
    assert "required" not in gemini
    assert described(BY_NAME["get_issue"].description, schema) == (
        "Get an issue by its identifier or its URL.\n\n"
        "Arguments must match exactly one of these forms: (1) with `identifier`; (2) with `url`."
    )


def test_a_root_anyof_of_objects_is_one_object_requiring_what_every_one_requires() -> None:
    schema = schema_of("find")
    root = anthropic_input_schema(schema)
    assert root["type"] == "object"
    assert root["properties"] == {
        "name": {"type": "string"},
        "limit": {"type": "integer"},
        "id": {"type": "integer"},
    }
    assert root["required"] == ["limit"]
    assert "$schema" not in root
    assert described("Find.", schema) == (
        "Find.\n\nArguments must match at least one of these forms: (1) with `name`; (2) with `id`."
    )


def test_a_root_allof_is_merged_and_needs_no_sentence() -> None:
    schema = schema_of("merge_settings")
    root, _ = openai_parameters(schema)
    assert set(root["properties"]) == {"base", "overrides"}
    assert root["required"] == ["base"]
    assert "allOf" not in root
    assert described("Settings.", schema) == "Settings."


def test_discriminated_alternatives_are_named_by_their_fixed_values() -> None:
    schema = {
        "type": "object",
        "oneOf": [
            {"properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}},
            {"properties": {"kind": {"enum": ["square"]}, "side": {"type": "number"}}},
        ],
    }
    assert described("", schema) == (
        'Arguments must match exactly one of these forms: (1) `kind` = "circle"; '
        '(2) `kind` = "square"'
        "."
    )
    kind = anthropic_input_schema(schema)["properties"]["kind"]
    assert kind == {"anyOf": [{"const": "circle"}, {"enum": ["square"]}]}


def test_arrays_without_items_get_any_item_for_openai() -> None:
    bulk, strict = openai_parameters(schema_of("bulk_update"))
    assert not strict
    assert bulk["properties"]["ids"] == {"type": "array", "items": {}}
    # A draft-07 tuple is written as 2020-12 says it, with no item beyond the pair.
    assert bulk["properties"]["range"] == {
        "type": "array",
        "prefixItems": [{"type": "integer"}, {"type": "integer"}],
        "items": False,
    }
    plot, _ = openai_parameters(schema_of("plot"))
    point = plot["properties"]["point"]  # pydantic's tuple[float, float]
    assert point["prefixItems"] == [{"type": "number"}, {"type": "number"}]
    assert point["items"] == {}
    assert (point["minItems"], point["maxItems"]) == (2, 2)
    assert plot["properties"]["values"]["items"] == {}  # pydantic already said so
    # Anthropic takes arrays as written.
    assert anthropic_input_schema(schema_of("bulk_update"))["properties"]["ids"] == {
        "type": "array"
    }


def test_nested_alternatives_keep_their_properties_for_gemini() -> None:
    move = gemini_parameters(schema_of("move_file"))
    assert move is not None
    to = move["properties"]["to"]
    assert to["type"] == "object"
    assert to["properties"] == {"dir": {"type": "string"}, "url": {"type": "string"}}
    assert to["description"] == (
        "Arguments must match exactly one of these forms: (1) with `dir`; (2) with `url`."
    )
    ship = gemini_parameters(schema_of("ship"))
    assert ship is not None
    circle, square = ship["properties"]["shape"]["anyOf"]  # whole schemas stay alternatives
    assert circle["properties"]["kind"] == {"type": "string", "enum": ["circle"]}
    assert set(square["properties"]) == {"kind", "side"}
    assert ship["properties"]["to"]["nullable"] is True
    assert set(ship["properties"]["to"]["properties"]) == {"street", "city"}


def test_free_form_objects_are_json_text_for_gemini() -> None:
    annotate = gemini_parameters(schema_of("annotate"))
    assert annotate is not None
    props = annotate["properties"]
    assert props["meta"] == {
        "type": "string",
        "description": "A JSON object, written as JSON text.",
    }
    assert props["labels"] == {
        "type": "string",
        "nullable": True,
        "description": "A JSON object, written as JSON text, whose values are of type string.",
    }
    assert annotate["required"] == ["path", "meta"]
    plot = gemini_parameters(schema_of("plot"))
    assert plot is not None
    assert plot["properties"]["rows"]["items"]["type"] == "string"
    assert plot["properties"]["point"]["items"] == {"type": "number"}
    bulk = gemini_parameters(schema_of("bulk_update"))
    assert bulk is not None
    assert bulk["properties"]["patch"]["type"] == "string"
    assert bulk["properties"]["patch"]["nullable"] is True
    assert bulk["properties"]["where"]["description"] == (
        "A JSON object, written as JSON text, with the keys `table`."
    )


def test_json_text_gemini_wrote_is_read_back_into_the_objects_the_tool_takes() -> None:
    annotate = gemini_json_text_fields(schema_of("annotate"))
    assert annotate is not None
    written = {"path": "a.txt", "meta": '{"tags": ["x"], "n": 1}', "labels": None}
    assert annotate.decode(written) == {
        "path": "a.txt",
        "meta": {"tags": ["x"], "n": 1},
        "labels": None,
    }
    # Text that is no JSON object is left for the tool's own check to refuse.
    assert annotate.decode({"meta": "not json", "labels": "[1]"}) == {
        "meta": "not json",
        "labels": "[1]",
    }
    plot = gemini_json_text_fields(schema_of("plot"))
    assert plot is not None
    assert plot.decode({"point": [1, 2], "rows": ['{"a": 1}', '{"b": 2}']}) == {
        "point": [1, 2],
        "rows": [{"a": 1}, {"b": 2}],
    }
    assert gemini_json_text_fields(BY_NAME["get_issue"].input_schema) is None


def test_what_no_provider_can_be_told_is_named() -> None:
    assert unexpressed({"type": "string"}) == (
        'its arguments are not a JSON object (type "string")',
    )
    either: dict[str, Any] = {
        "oneOf": [{"type": "object", "properties": {"a": {}}}, {"type": "string"}]
    }
    assert unexpressed(either) == ("the `oneOf` alternatives that are not objects",)
    assert set(anthropic_input_schema(either)["properties"]) == {"a"}
    assert unexpressed({"type": "object", "not": {"required": ["a", "b"]}}) == (
        "the `not` at its root",
    )
    assert "not" not in openai_parameters({"type": "object", "not": {"required": ["a"]}})[0]
