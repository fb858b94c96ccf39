"""An agent's tool schemas as served: its `inputSchema` says what a call must hold, and its
output schema is the tool's `outputSchema` with its definitions at the root, where its `$ref`s
resolve, so a client that resolves them (the mcp SDK's) takes the answers."""

from __future__ import annotations

from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from pydantic import BaseModel

from agent import FINAL_RESULT_TOOL, AgentOptions, OutputSchema, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.server.served.output_schemas import hoisted

from .support import ERAS, call, serve

pytestmark = pytest.mark.anyio


class Item(BaseModel):
    name: str
    price: float


class Node(BaseModel):
    """A recursive type: pydantic writes it under `$defs`, its children `$ref`s to itself."""

    item: Item
    children: list[Node] = []


class Basket(BaseModel):
    total: float
    tree: Node


TREE: dict[str, Any] = {
    "item": {"name": "box", "price": 1.0},
    "children": [{"item": {"name": "pen", "price": 2.5}, "children": []}],
}


class Checker:
    """A JSON Schema 2020-12 validator of `schema` that resolves its refs."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._validator: Any = Draft202012Validator(schema)

    def is_valid(self, instance: Any) -> bool:
        return bool(self._validator.is_valid(instance))


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


def shop(*answers: Any) -> Gateway:
    output = OutputSchema.from_model(Basket)
    assert "$defs" in output.schema  # what makes the case: pydantic's definitions and refs
    model = ScriptedModel([call(FINAL_RESULT_TOOL, **answer) for answer in answers])
    spec = AgentSpec(name="shop", model=model, options=AgentOptions(output=output, batch_size=1))
    return Gateway([], [spec])


async def test_the_input_schema_says_a_prompt_must_not_be_blank(era: str) -> None:
    # The gateway refuses a blank prompt (tests/server/test_agent_tools.py): a client or a
    # model building arguments from the schema is told so beforehand.
    async with Client(serve(shop()), mode=era) as client:
        tool = (await client.list_tools()).tools[0]
    properties = tool.input_schema["properties"]
    item = properties["items"]["items"]["properties"]["prompt"]
    checker = Checker(tool.input_schema)
    assert not checker.is_valid({"prompt": ""})
    assert not checker.is_valid({"items": [{"prompt": ""}]})
    assert checker.is_valid({"prompt": "?"})
    assert checker.is_valid({"items": [{"prompt": "?"}]})
    # Only whitespace is said in words: a `pattern` breaks llama.cpp's tool grammars.
    for said in (properties["prompt"], item):
        assert "not empty or only whitespace" in said["description"]
        assert "pattern" not in said


async def test_a_recursive_pydantic_output_is_served_with_refs_that_resolve(era: str) -> None:
    answer = {"total": 3.5, "tree": TREE}
    async with Client(serve(shop(answer, answer, answer)), mode=era) as client:
        tool = (await client.list_tools()).tools[0]
        # The SDK checks each result against the listed schema, resolving its refs.
        result = await client.call_tool("shop", {"prompt": "What is in the basket?"})
        items = await client.call_tool("shop", {"items": [{"prompt": "a"}, {"prompt": "b"}]})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["output"] == answer
    assert items.structured_content is not None
    assert [i["output"] for i in items.structured_content["items"]] == [answer, answer]
    schema = tool.output_schema
    assert schema is not None
    assert set(schema["$defs"]) == {"Item", "Node"}
    assert "$defs" not in schema["properties"]["output"]
    checker = Checker(schema)
    assert checker.is_valid(result.structured_content)
    assert checker.is_valid(items.structured_content)
    wrong = {"total": 1, "tree": {"item": {"name": "x", "price": 1}, "children": [{"item": 3}]}}
    assert not checker.is_valid({**result.structured_content, "output": wrong})


def test_hoisted_definitions_keep_every_reference_to_what_it_named() -> None:
    agent_schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://example.com/answer",
        "type": "object",
        "properties": {
            "a": {"$ref": "#/$defs/A"},  # a `$defs` and a draft-07 `definitions` A: both kept
            "old": {"$ref": "#/definitions/A"},
            "odd": {"$ref": "#/$defs/a~1b%25c"},  # a name with / and %: escaped as it must be
            "again": {"type": "array", "items": {"$ref": "#"}},  # the agent schema's root
            "first": {"$ref": "#/properties/a"},
            "$ref": {"const": {"$ref": "#/not/a/reference"}},  # a property named $ref; data
            "own": {"$id": "https://example.com/own", "$ref": "#/$defs/B", "$defs": {"B": {}}},
        },
        "$defs": {"A": {"type": "integer"}, "a/b%c": {"type": "boolean"}},
        "definitions": {"A": {"type": "string"}},
    }
    body, definitions = hoisted(agent_schema, at=("properties", "output"))
    assert set(definitions) == {"A", "A_", "a/b%c"}
    properties = body["properties"]
    assert properties["a"] == {"$ref": "#/$defs/A"}
    assert properties["old"] == {"$ref": "#/$defs/A_"}
    assert properties["odd"] == {"$ref": "#/$defs/a~1b%25c"}
    assert properties["again"]["items"] == {"$ref": "#/properties/output"}
    assert properties["first"] == {"$ref": "#/properties/output/properties/a"}
    assert properties["$ref"] == agent_schema["properties"]["$ref"]
    assert properties["own"] == agent_schema["properties"]["own"]  # its refs are its own
    assert not {"$defs", "definitions", "$id", "$schema"} & set(body)
    document = {"type": "object", "properties": {"output": body}, "$defs": definitions}
    checker = Checker(document)
    good = {"a": 1, "old": "x", "odd": True, "again": [{"a": 2}], "first": 3}
    assert checker.is_valid({"output": good})
    for wrong in ({"a": "x"}, {"old": 1}, {"odd": 1}, {"again": [{"a": "x"}]}, {"first": "x"}):
        assert not checker.is_valid({"output": wrong}), wrong
