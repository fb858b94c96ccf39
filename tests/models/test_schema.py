"""Tool-schema conversion, table-driven over schemas real MCP servers listed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypeGuard

import pytest

from agent.messages import ToolDefinition
from agent.models.schema import (
    anthropic_input_schema,
    gemini_parameters,
    inline_refs,
    openai_parameters,
)

from .conftest import load_tools

SERVERS = ("server-everything", "server-filesystem", "mcp-server-git", "mcp-python-sdk-pydantic")
ALL_TOOLS = [tool for server in SERVERS for tool in load_tools(server)]
BY_NAME = {tool.name: tool for tool in ALL_TOOLS}

# Whether OpenAI strict mode may be used: only when every property is required and nothing
# strict mode rejects remains (`format: uri`, free-form maps).
STRICT = {
    "echo": True,
    "get-sum": True,
    "get-env": True,
    "get-structured-content": True,
    "get-annotated-message": False,  # includeImage is optional
    "trigger-long-running-operation": False,  # both optional, with defaults
    "gzip-file-as-resource": False,  # format: uri, all optional
    "read_text_file": False,  # head/tail optional
    "read_multiple_files": True,  # minItems is allowed
    "write_file": True,
    "edit_file": False,  # dryRun optional
    "directory_tree": False,
    "list_allowed_directories": True,
    "git_status": True,
    "git_add": True,
    "git_commit": True,
    "git_log": False,  # optional nullable timestamps
    "git_diff": False,
    "git_create_branch": False,
    "move_to": True,  # its Point under $defs is strict too
    "create_event": False,  # a free-form `tags` map
    "save_tree": False,  # recursive, with optional children
}


def is_obj(value: object) -> TypeGuard[dict[str, Any]]:
    return isinstance(value, dict)


def is_arr(value: object) -> TypeGuard[list[Any]]:
    return isinstance(value, list)


def nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every schema node: the root, properties, items, and union members."""
    if not is_obj(schema):
        return
    node = schema
    yield node
    for sub in node.get("properties", {}).values():
        yield from nodes(sub)
    yield from nodes(node.get("items"))
    for key in ("anyOf", "oneOf", "allOf"):
        for sub in node.get(key, []):
            yield from nodes(sub)


def keys_anywhere(schema: Any) -> set[str]:
    found: set[str] = set()
    if is_obj(schema):
        for key, value in schema.items():
            found.add(key)
            found |= keys_anywhere(value)
    elif is_arr(schema):
        for value in schema:
            found |= keys_anywhere(value)
    return found


def test_the_fixtures_hold_the_tools_the_table_names() -> None:
    assert set(STRICT) <= set(BY_NAME)
    assert len(ALL_TOOLS) == 42


def refs_anywhere(schema: Any) -> set[str]:
    if is_arr(schema):
        return set[str]().union(*map(refs_anywhere, schema))
    if not is_obj(schema):
        return set()
    found = {schema["$ref"]} if "$ref" in schema else set[str]()
    return found.union(*map(refs_anywhere, schema.values()))


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_refs_stay_where_the_provider_takes_them(tool: ToolDefinition) -> None:
    gemini = gemini_parameters(tool.input_schema) or {}
    assert not {"$ref", "$defs", "$schema", "definitions"} & keys_anywhere(gemini)
    for converted in (
        anthropic_input_schema(tool.input_schema),
        openai_parameters(tool.input_schema)[0],
    ):
        assert not {"$schema", "definitions"} & keys_anywhere(converted)
        defs = converted.get("$defs", {})
        # Each $ref names a definition at the root, and each definition there is used.
        assert refs_anywhere(converted) == {f"#/$defs/{name}" for name in defs}
        assert ("$defs" in converted) is ("$defs" in tool.input_schema)


@pytest.mark.parametrize("name", sorted(STRICT))
def test_openai_strict_only_where_the_schema_allows(name: str) -> None:
    parameters, strict = openai_parameters(BY_NAME[name].input_schema)
    assert strict is STRICT[name]
    if strict:
        for node in nodes(parameters):
            if node.get("type") == "object":
                assert node["additionalProperties"] is False
                assert node["required"] == list(node["properties"])
            assert "default" not in node
    else:
        assert parameters == anthropic_input_schema(BY_NAME[name].input_schema)  # as written


def test_non_strict_openai_keeps_the_schema_as_written() -> None:
    parameters, strict = openai_parameters(BY_NAME["git_log"].input_schema)
    assert not strict
    assert parameters["properties"]["start_timestamp"]["anyOf"] == [
        {"type": "string"},
        {"type": "null"},
    ]
    assert parameters["properties"]["max_count"]["default"] == 10
    assert parameters["title"] == "logArguments"


GEMINI_KEYS = {
    "type", "format", "description", "nullable", "enum", "items", "properties", "required",
    "anyOf", "minimum", "maximum", "minItems", "maxItems",
}  # fmt: skip


@pytest.mark.parametrize("tool", ALL_TOOLS, ids=lambda t: t.name)
def test_gemini_gets_only_its_subset(tool: ToolDefinition) -> None:
    parameters = gemini_parameters(tool.input_schema)
    if not tool.input_schema.get("properties"):
        assert parameters is None
        return
    assert parameters is not None
    assert parameters["type"] == "object"
    for node in nodes(parameters):
        assert set(node) <= GEMINI_KEYS, node
        assert "anyOf" in node or isinstance(node.get("type"), str), node
        if node.get("type") == "array":
            assert isinstance(node["items"], dict)
        if "required" in node:
            assert set(node["required"]) <= set(node["properties"])
        if "enum" in node:
            assert node["type"] == "string"


def test_gemini_nullable_unions_enums_and_formats() -> None:
    log = gemini_parameters(BY_NAME["git_log"].input_schema)
    assert log is not None
    start = log["properties"]["start_timestamp"]
    assert start["type"] == "string"
    assert start["nullable"] is True
    assert start["description"].startswith("Start timestamp for filtering commits.")
    assert set(start) == {"type", "nullable", "description"}
    assert log["required"] == ["repo_path"]
    gzip = gemini_parameters(BY_NAME["gzip-file-as-resource"].input_schema)
    assert gzip is not None
    assert "format" not in gzip["properties"]["data"]  # `uri` is not a Gemini format
    assert gzip["properties"]["outputType"]["enum"] == ["resourceLink", "resource"]
    event = gemini_parameters(BY_NAME["create_event"].input_schema)
    assert event is not None
    attendees = event["properties"]["event"]["properties"]["attendees"]
    assert attendees["items"]["properties"]["email"] == {"type": "string"}
    tags = event["properties"]["event"]["properties"]["tags"]  # a free-form map: JSON text
    assert tags == {
        "type": "string",
        "description": "A JSON object, written as JSON text, whose values are of type string.",
    }


def test_type_lists_and_untyped_values_in_gemini() -> None:
    schema = {
        "type": "object",
        "properties": {
            "id": {"type": ["integer", "string"]},
            "maybe": {"type": ["number", "null"]},
            "anything": {"description": "any JSON"},
            "tuple": {"type": "array"},
            "level": {"enum": [1, 2, 3], "type": "integer"},
            "fixed": {"const": "v1"},
        },
        "required": ["id", "missing"],
    }
    parameters = gemini_parameters(schema)
    assert parameters is not None
    props = parameters["properties"]
    assert props["id"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["maybe"] == {"type": "number", "nullable": True}
    # Gemini has no "any value": JSON text of one (see test_schema_edge_cases).
    assert props["anything"] == {
        "type": "string",
        "description": "any JSON (Any JSON value, written as JSON text.)",
    }
    assert props["tuple"]["type"] == "array"
    assert props["tuple"]["items"] == {
        "type": "string",
        "description": "Any JSON value, written as JSON text.",
    }
    assert props["level"] == {"type": "integer"}  # Gemini enums are strings only
    assert props["fixed"] == {"type": "string", "enum": ["v1"]}
    assert parameters["required"] == ["id"]


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    inlined = inline_refs(BY_NAME["create_event"].input_schema)
    event = inlined["properties"]["event"]
    assert event["properties"]["attendees"]["items"]["required"] == ["email"]

    tree = inline_refs(BY_NAME["save_tree"].input_schema)
    depth = 0
    node: Any = tree["properties"]["root"]
    while "properties" in node:
        depth += 1
        node = node["properties"]["children"]["items"]
    assert depth == 2
    assert node == {}  # beyond the cut any value is allowed


def test_ref_siblings_refine_the_target() -> None:
    schema = {
        "type": "object",
        "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}},
        "properties": {"p": {"$ref": "#/$defs/Point", "description": "where"}},
    }
    assert inline_refs(schema)["properties"]["p"] == {
        "type": "object",
        "properties": {"x": {"type": "number"}},
        "description": "where",
    }


def test_a_schema_without_object_root_is_made_one() -> None:
    assert anthropic_input_schema({}) == {"type": "object", "properties": {}}
    parameters, strict = openai_parameters({"type": "object"})
    assert parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
        "required": [],
    }
    assert strict


def test_property_names_that_look_like_keywords_survive() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"definitions": {"type": "string"}, "$id": {"type": "integer"}},
        "required": ["definitions", "$id"],
    }
    # Anthropic refuses a `$` in a top-level key: `$id` is declared to it as `_id`.
    assert set(anthropic_input_schema(schema)["properties"]) == {"definitions", "_id"}
    parameters, strict = openai_parameters(schema)
    assert strict
    assert set(parameters["properties"]) == {"definitions", "$id"}
    gemini = gemini_parameters(schema)
    assert gemini is not None
    assert gemini["required"] == ["definitions", "$id"]


def test_conversion_never_changes_the_input() -> None:
    schema = BY_NAME["create_event"].input_schema
    before = repr(schema)
    converted = anthropic_input_schema(schema)
    converted["$defs"]["Event"]["properties"]["title"]["description"] = "changed"
    converted["properties"]["event"]["changed"] = True
    openai_parameters(schema)
    gemini_parameters(schema)
    assert repr(schema) == before
