"""A tool schema's `$defs`/`$ref`s in the request each provider is sent: kept for OpenAI (chat
completions and Responses) and Anthropic, so a recursive type is told whole; written out for
Gemini and OpenAI-compatible servers, within a budget, so a DAG of shared definitions cannot
blow up; and calls in the recursive shape reaching a real tool intact."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agent.messages import ToolDefinition, ToolMessage, UserMessage
from agent.models import (
    AnthropicModel,
    GeminiModel,
    OpenAICompatibleModel,
    OpenAICompatibleResponsesModel,
    OpenAIModel,
    OpenAIResponsesModel,
)
from agent.models._refs import INLINE_BUDGET, inline_refs
from agent.models.anthropic_schema import anthropic_input_schema, anthropic_property_keys
from agent.models.schema import gemini_parameters, openai_parameters
from toolkits import function_tool

from .support import FakeProvider, Sleeps, json_response, retry_policy
from .test_anthropic_property_keys import done
from .test_gemini_json_text import generated
from .test_openai import call, completion
from .test_openai_responses import response

ASK = [UserMessage(content="Save the tree.")]


class Node(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    name: str
    filter: str = Field(alias="filter[id]")  # a key Anthropic refuses, inside a definition
    children: list[Node]


class SaveTree(BaseModel):
    tree: Node = Field(description="The tree to save.")


TREE_SCHEMA = SaveTree.model_json_schema()
SAVE_TREE = ToolDefinition(
    name="save_tree", description="Save a tree.", source_node="n", input_schema=TREE_SCHEMA
)
DEEP: dict[str, Any] = {
    "tree": {
        "name": "a",
        "filter[id]": "1",
        "children": [
            {
                "name": "b",
                "filter[id]": "2",
                "children": [
                    {
                        "name": "c",
                        "filter[id]": "3",
                        "children": [{"name": "d", "filter[id]": "4", "children": []}],
                    }
                ],
            }
        ],
    }
}
"""Arguments four levels deep: past the two levels a written-out recursion tells."""


def dag(levels: int) -> dict[str, Any]:
    """Definitions D0..Dn-1, each with two properties that are the next one: 2**levels leaves
    when written out."""
    defs: dict[str, Any] = {}
    for level in range(levels):
        below = {"$ref": f"#/$defs/D{level + 1}"} if level + 1 < levels else {"type": "string"}
        defs[f"D{level}"] = {
            "type": "object",
            "properties": {"a": dict(below), "b": dict(below)},
            "required": ["a", "b"],
        }
    return {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/D0"}},
        "required": ["root"],
        "$defs": defs,
    }


DAG = ToolDefinition(name="shared", description="Shared.", source_node="n", input_schema=dag(22))


def objects(schema: Any) -> int:
    if isinstance(schema, list):
        return sum(objects(item) for item in schema)  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if isinstance(schema, dict):
        return 1 + sum(objects(value) for value in schema.values())  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    return 0


def depth_told(schema: dict[str, Any], node: dict[str, Any]) -> int:
    """How many levels of `children` the schema spells out below `node`, following `$ref`s
    (a recursive one: as far as asked, so stop at 10)."""
    level = 0
    while level < 10:
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].removeprefix("#/$defs/")]
        elif "anyOf" in node:
            node = node["anyOf"][0]
        elif "children" in node.get("properties", {}):
            node = node["properties"]["children"]["items"]
            level += 1
        else:
            break
    return level


def closed_everywhere(schema: dict[str, Any]) -> bool:
    nodes = [schema, *schema.get("$defs", {}).values()]
    return all(
        node.get("additionalProperties") is False and node["required"] == list(node["properties"])
        for node in nodes
        if node.get("type") == "object"
    )


@pytest.mark.anyio
async def test_openai_is_sent_the_recursive_type_whole_and_strict(sleeps: Sleeps) -> None:
    answer = {"role": "assistant", "content": None, "tool_calls": [
        call("call_1", "save_tree", json.dumps(DEEP)),
    ]}  # fmt: skip
    fake = FakeProvider(json_response(200, completion(answer, "tool_calls")))
    model = OpenAIModel(
        "gpt-4.1-mini", api_key="sk-test", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    message = await model.invoke(ASK, [SAVE_TREE])

    [sent] = fake.body()["tools"]
    parameters = sent["function"]["parameters"]
    assert sent["function"]["strict"] is True
    assert set(parameters["$defs"]) == {"Node"}
    assert depth_told(parameters, parameters["properties"]["tree"]) == 10  # no end: recursion
    assert closed_everywhere(parameters)
    # Strict mode takes no keyword beside a $ref: the description goes beside an anyOf of it.
    assert parameters["properties"]["tree"] == {
        "anyOf": [{"$ref": "#/$defs/Node"}],
        "description": "The tree to save.",
    }
    [tool_call] = message.tool_calls
    assert SaveTree.model_validate(tool_call.arguments) == SaveTree.model_validate(DEEP)


@pytest.mark.anyio
async def test_openai_responses_is_sent_the_recursive_type_whole(sleeps: Sleeps) -> None:
    function_call = {
        "id": "fc_1", "type": "function_call", "status": "completed",
        "arguments": json.dumps(DEEP), "call_id": "call_1", "name": "save_tree",
    }  # fmt: skip
    fake = FakeProvider(json_response(200, response([function_call])))
    model = OpenAIResponsesModel(
        "gpt-5-mini", api_key="sk-test", http_client=fake.client(), retry=retry_policy(sleeps)
    )
    message = await model.invoke(ASK, [SAVE_TREE])

    [sent] = fake.body()["tools"]
    assert sent["strict"] is True
    assert set(sent["parameters"]["$defs"]) == {"Node"}
    assert depth_told(sent["parameters"], sent["parameters"]["properties"]["tree"]) == 10
    assert closed_everywhere(sent["parameters"])
    [tool_call] = message.tool_calls
    assert tool_call.arguments == DEEP


def anthropic_call(arguments: dict[str, Any], name: str = "save_tree") -> dict[str, Any]:
    return {
        "id": "msg_01", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "tool_use", "id": "toolu_01", "name": name, "input": arguments}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 40, "output_tokens": 30},
    }  # fmt: skip


def declared_keys(value: Any) -> Any:
    """`value` with `filter[id]` written as Anthropic was told it (`filter_id_`)."""
    if isinstance(value, list):
        return [declared_keys(item) for item in value]  # pyright: ignore[reportUnknownVariableType]
    if isinstance(value, dict):
        return {
            ("filter_id_" if key == "filter[id]" else key): declared_keys(sub)
            for key, sub in value.items()  # pyright: ignore[reportUnknownVariableType]
        }
    return value


@pytest.mark.anyio
async def test_anthropic_keys_inside_definitions_are_declared_and_given_back_at_every_depth(
    sleeps: Sleeps,
) -> None:
    written = declared_keys(DEEP)
    fake = FakeProvider(json_response(200, anthropic_call(written)), json_response(200, done()))
    model = AnthropicModel(
        "claude-sonnet-4-5", api_key="sk-ant-test", http_client=fake.client(),
        retry=retry_policy(sleeps),
    )  # fmt: skip
    first = await model.invoke(ASK, [SAVE_TREE])

    schema = fake.body(0)["tools"][0]["input_schema"]
    node = schema["$defs"]["Node"]
    assert set(node["properties"]) == {"name", "filter_id_", "children"}
    assert node["required"] == ["name", "filter_id_", "children"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert depth_told(schema, schema["properties"]["tree"]) == 10
    [tool_call] = first.tool_calls
    assert tool_call.arguments == DEEP  # the tool's own keys, four levels down
    assert SaveTree.model_validate(tool_call.arguments).tree.children[0].children[0].filter == "3"

    result = ToolMessage(tool_call_id="toolu_01", name="save_tree", content="saved")
    await model.invoke([*ASK, first, result], [SAVE_TREE])
    # The call goes back to Anthropic under the keys it was told, at every depth.
    assert fake.body(1)["messages"][1]["content"][0]["input"] == written


@pytest.mark.anyio
async def test_gemini_is_sent_the_recursive_type_written_out(sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, generated("save_tree", {"tree": DEEP["tree"]})))
    model = GeminiModel(
        "gemini-2.5-flash", api_key="AIza-test", http_client=fake.client(),
        retry=retry_policy(sleeps),
    )  # fmt: skip
    await model.invoke(ASK, [SAVE_TREE])
    [declared] = fake.body()["tools"][0]["functionDeclarations"]
    assert "$defs" not in json.dumps(declared)
    assert depth_told(declared["parameters"], declared["parameters"]["properties"]["tree"]) == 2


RESPONSE_TEXT = response([{
    "id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
    "content": [{"type": "output_text", "text": "ok", "annotations": []}],
}])  # fmt: skip
TEXT_ANSWERS: dict[str, Any] = {
    "openai": completion({"role": "assistant", "content": "ok"}),
    "compatible": completion({"role": "assistant", "content": "ok"}),
    "responses": RESPONSE_TEXT,
    "compatible-responses": RESPONSE_TEXT,
    "anthropic": {**done(), "content": [{"type": "text", "text": "ok"}]},
    "gemini": {
        "candidates": [
            {"content": {"parts": [{"text": "ok"}], "role": "model"}, "finishReason": "STOP"}
        ],
        "usageMetadata": {"promptTokenCount": 20, "candidatesTokenCount": 1},
    },
}  # fmt: skip


WRITTEN_OUT = {"gemini", "compatible", "compatible-responses"}
"""Where no `$ref` goes: Gemini's `parameters`, and servers of their own."""


def model_of(provider: str, fake: FakeProvider, sleeps: Sleeps) -> Any:
    client = fake.client()
    retry = retry_policy(sleeps)
    local = "http://127.0.0.1:8080/v1"
    if provider == "openai":
        return OpenAIModel("gpt-4.1-mini", api_key="k", http_client=client, retry=retry)
    if provider == "compatible":
        return OpenAICompatibleModel(local, "qwen2.5", http_client=client, retry=retry)
    if provider == "responses":
        return OpenAIResponsesModel("gpt-5-mini", api_key="k", http_client=client, retry=retry)
    if provider == "compatible-responses":
        return OpenAICompatibleResponsesModel(local, "qwen2.5", http_client=client, retry=retry)
    if provider == "anthropic":
        return AnthropicModel("claude-sonnet-4-5", api_key="k", http_client=client, retry=retry)
    return GeminiModel("gemini-2.5-flash", api_key="k", http_client=client, retry=retry)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", sorted(TEXT_ANSWERS))
async def test_a_dag_of_shared_definitions_is_sent_small(provider: str, sleeps: Sleeps) -> None:
    fake = FakeProvider(json_response(200, TEXT_ANSWERS[provider]))
    # Written out whole, 22 levels were 445 MB, in 100 s: past the test's timeout.
    answer = await model_of(provider, fake, sleeps).invoke(ASK, [DAG])
    assert answer.content == "ok"
    tools = json.dumps(fake.body()["tools"])
    assert len(tools) < 60_000
    if provider in WRITTEN_OUT:
        assert "$defs" not in tools
        assert "too large to write out here" in tools
    else:
        assert tools.count('"$ref"') == 2 * 21 + 1  # each definition once
        assert len(tools) < 5_000


@pytest.mark.anyio
@pytest.mark.parametrize("provider", sorted(WRITTEN_OUT - {"gemini"}))
async def test_openai_compatible_servers_are_sent_refs_written_out(
    provider: str, sleeps: Sleeps
) -> None:
    fake = FakeProvider(json_response(200, TEXT_ANSWERS[provider]))
    await model_of(provider, fake, sleeps).invoke(ASK, [SAVE_TREE])
    [sent] = fake.body()["tools"]
    parameters = sent.get("function", sent)["parameters"]
    assert "$ref" not in json.dumps(parameters)
    assert depth_told(parameters, parameters["properties"]["tree"]) == 2


def test_inlining_a_dag_leaves_the_most_copied_definitions_open() -> None:
    for levels in (18, 22, 40):
        written = inline_refs(dag(levels))
        assert objects(written) <= INLINE_BUDGET
        node = written["properties"]["root"]
        kept = 0
        while "properties" in node:
            node, kept = node["properties"]["a"], kept + 1
        assert kept >= 8  # the top levels are told; the deepest shared ones are open
        assert node["description"].startswith("Any value is accepted: the `D")
    assert inline_refs(dag(8)) == inline_refs(dag(8), budget=10**9)  # small: all written out


def test_a_schema_large_as_written_is_not_cut_and_a_long_dag_stays_linear() -> None:
    # 1,500 types, each used once: 3,000+ nodes written out, as many as written.
    defs = {
        f"T{n}": {"type": "object", "properties": {"v": {"type": "string"}}} for n in range(1500)
    }
    unique = {
        "type": "object",
        "properties": {f"p{n}": {"$ref": f"#/$defs/T{n}"} for n in range(1500)},
        "$defs": defs,
    }
    assert "too large" not in json.dumps(inline_refs(unique))
    assert objects(inline_refs(unique)) > INLINE_BUDGET
    long = dag(3_000)  # a schema of 450 KB
    written = inline_refs(long)  # one pass per halving of the copies allowed: 0.2 s
    assert objects(written) <= 2 * objects(long)


def test_draft_07_definitions_are_sent_as_defs() -> None:
    schema = TypeAdapter(SaveTree).json_schema(ref_template="#/definitions/{model}")
    schema["definitions"] = schema.pop("$defs")
    parameters, strict = openai_parameters(schema)
    assert strict
    assert set(parameters["$defs"]) == {"Node"}
    assert "definitions" not in json.dumps(parameters)
    assert parameters["$defs"]["Node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    declared = anthropic_input_schema(schema)
    assert set(declared["$defs"]["Node"]["properties"]) == {"name", "filter_id_", "children"}
    keys = anthropic_property_keys(schema)
    assert keys is not None
    assert keys.restore(declared_keys(DEEP)) == DEEP


class Draft(BaseModel):
    tree: Node = Field(description="The tree to save.")
    note: str = ""


def test_openai_is_sent_no_keyword_beside_a_ref_strict_or_not() -> None:
    parameters, strict = openai_parameters(Draft.model_json_schema())
    assert not strict  # `note` is optional
    assert parameters["properties"]["tree"] == {
        "anyOf": [{"$ref": "#/$defs/Node"}],
        "description": "The tree to save.",
    }
    assert parameters["$defs"]["Node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }


@pytest.mark.anyio
async def test_gemini_writes_a_definition_left_open_as_json_text_the_tool_gets_whole(
    sleeps: Sleeps,
) -> None:
    parameters = gemini_parameters(DAG.input_schema)
    assert parameters is not None
    path: list[str] = ["root"]
    node = parameters["properties"]["root"]
    while "properties" in node:
        path.append("a")
        node = node["properties"]["a"]
    assert node["type"] == "string"
    assert "the `D" in node["description"]
    below: dict[str, Any] = {"a": {"a": "x", "b": "y"}, "b": {"a": "z", "b": "w"}}
    written: Any = json.dumps(below)
    own: Any = below
    for key in reversed(path):
        written, own = {key: written}, {key: own}
    fake = FakeProvider(json_response(200, generated("shared", written)))
    message = await model_of("gemini", fake, sleeps).invoke(ASK, [DAG])
    [tool_call] = message.tool_calls
    assert tool_call.arguments == own


def filters(tree: Node) -> list[str]:
    """Each node's filter, depth first."""
    return [tree.filter, *(f for child in tree.children for f in filters(child))]


def calling(provider: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A real-format answer of `provider` calling `name` with `arguments`."""
    if provider == "anthropic":
        return anthropic_call(declared_keys(arguments), name)
    if provider == "responses":
        return response([{
            "id": "fc_1", "type": "function_call", "status": "completed",
            "arguments": json.dumps(arguments), "call_id": "call_1", "name": name,
        }])  # fmt: skip
    message = {"role": "assistant", "content": None, "tool_calls": [
        call("call_1", name, json.dumps(arguments)),
    ]}  # fmt: skip
    return completion(message, "tool_calls")


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "responses", "anthropic"])
async def test_a_call_in_the_recursive_shape_reaches_a_real_tool_intact(
    provider: str, sleeps: Sleeps
) -> None:
    tool = function_tool(filters)
    offered = ToolDefinition(
        name=tool.name, description=tool.description, source_node="local",
        input_schema=tool.input_schema,
    )  # fmt: skip
    assert "$defs" in tool.input_schema  # pydantic's own schema, as a server lists it
    fake = FakeProvider(json_response(200, calling(provider, tool.name, DEEP)))
    message = await model_of(provider, fake, sleeps).invoke(ASK, [offered])
    [sent] = fake.body()["tools"]
    schema = sent.get("input_schema") or sent.get("parameters") or sent["function"]["parameters"]
    assert depth_told(schema, schema["properties"]["tree"]) >= 4  # as deep as the call goes
    [tool_call] = message.tool_calls
    result = await tool(tool_call.arguments)
    assert not result.is_error, result
    assert result.structured_content == {"response": ["1", "2", "3", "4"]}
