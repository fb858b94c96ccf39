"""Answers in a schema: given through the final_result tool (or as JSON text), validated,
sent back with the errors up to output_retries, served over MCP as structured content."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client
from pydantic import BaseModel, JsonValue

from agent import (
    FINAL_RESULT_TOOL,
    AgentOptions,
    InProcessStore,
    OutputSchema,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    ToolMessage,
    UserMessage,
)
from agent.memory import is_valid_history
from agent.models import OpenAICompatibleModel
from agent.models._json_schema import object_root
from gateway import AgentSpec, ConfigError, Gateway
from gateway.cli import main
from gateway.config import parse_config
from tests.server.support import serve
from tests.test_engine import Recorder
from toolkits import FunctionToolkit, calculator

pytestmark = pytest.mark.anyio

TOTAL = OutputSchema.from_json_schema(
    {
        "type": "object",
        "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
        "required": ["total"],
        "additionalProperties": False,
    }
)


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def gateway_for(model: Any, output: OutputSchema = TOTAL, retries: int = 1) -> Gateway:
    options = AgentOptions(output=output, output_retries=retries)
    spec = AgentSpec(
        name="shop",
        model=model,
        tools=["calculator"],
        options=options,
        memory=SessionMemory(InProcessStore()),
    )
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


async def test_a_valid_final_result_call_is_the_runs_output() -> None:
    model = ScriptedModel(
        [call("calculator", expression="17 * 25"), call(FINAL_RESULT_TOOL, total=425)]
    )
    gateway = gateway_for(model)
    result = await gateway.run("shop", "What do 17 shirts at 25 cost?", session_id="s")
    assert result.error is None
    assert result.structured == {"total": 425}
    assert result.output == '{"total": 425}'
    offered = [tool.name for tool in model.calls[0][1]]
    assert offered == ["calculator", FINAL_RESULT_TOOL]
    assert model.calls[0][1][1].input_schema == TOTAL.schema
    memory = gateway.agents["shop"].memory
    assert isinstance(memory, SessionMemory)
    history = (await memory.load("s")).messages
    assert is_valid_history(history)  # the final_result call is not left unanswered
    assert history[-1].content == '{"total": 425}'


async def test_a_final_result_called_with_other_tools_waits_for_their_results() -> None:
    both = ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="calculator", arguments={"expression": "2+2"}),
            ScriptedCall(name=FINAL_RESULT_TOOL, arguments={"total": 1}),
        ]
    )
    model = ScriptedModel([both, call(FINAL_RESULT_TOOL, total=4)])
    recorder = Recorder()
    result = await gateway_for(model).run("shop", "2+2?", hooks=[recorder])
    assert result.structured == {"total": 4}  # not the answer written before the result
    assert result.iterations == 2
    told = {m.name: m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)}
    assert told["calculator"] == "4"  # it ran
    assert told[FINAL_RESULT_TOOL] == (
        "Error: final_result was not taken: it was called together with calculator, so it "
        "could not use their results (given with this one). Call final_result alone once you "
        "have read them."
    )
    ended = {(e.name, e.phase) for e in recorder.events if e.kind == "tool"}
    assert ("calculator", "end") in ended
    assert (FINAL_RESULT_TOOL, "error") in ended  # --trace says so


async def test_an_invalid_answer_goes_back_with_its_errors_and_is_fixed() -> None:
    model = ScriptedModel(
        [
            call(FINAL_RESULT_TOOL, total="many"),
            "About 425 dollars.",
            ScriptedAnswer(content='```json\n{"total": 425, "currency": "USD"}\n```'),
        ]
    )
    result = await gateway_for(model, retries=2).run("shop", "What do 17 shirts at 25 cost?")
    assert result.structured == {"total": 425, "currency": "USD"}
    second = model.calls[1][0]
    assert isinstance(second[-1], ToolMessage)
    assert second[-1].content.startswith("Error: the answer does not fit the output schema: ")
    assert "at total: 'many' is not of type 'number'" in second[-1].content
    third = model.calls[2][0]
    assert isinstance(third[-1], UserMessage)  # the text answer is corrected as the user
    assert f"give your final answer by calling the {FINAL_RESULT_TOOL!r} tool" in third[-1].content
    assert third[-2].content == "About 425 dollars."


async def test_an_answer_still_invalid_past_the_retries_fails_its_item() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, total="x"), call(FINAL_RESULT_TOOL, cost=1)])
    result = await gateway_for(model, retries=1).run("shop", "How much?")
    assert result.structured is None
    assert result.error is not None
    assert result.error == (
        "the model's answer did not fit the output schema after 1 retry: "
        "'total' is a required property (and 1 more)"  # `cost` is not allowed either
    )
    assert (len(model.calls), result.iterations) == (2, 2)


def finals(*answers: dict[str, JsonValue]) -> ScriptedAnswer:
    """One answer of several `final_result` calls."""
    return ScriptedAnswer(
        tool_calls=[ScriptedCall(name=FINAL_RESULT_TOOL, arguments=a) for a in answers]
    )


async def test_of_several_final_results_the_first_that_validates_is_the_answer() -> None:
    """Once only the first was read: a valid second failed the item with no retries left."""
    model = ScriptedModel([finals({"total": "two"}, {"total": 2}, {"total": 3})])
    result = await gateway_for(model, retries=0).run("shop", "1 + 1?")
    assert (result.error, result.structured) == (None, {"total": 2})
    assert len(model.calls) == 1


async def test_several_final_results_none_valid_are_each_told_their_own_errors() -> None:
    model = ScriptedModel([finals({"total": "two"}, {"cost": 2}), call(FINAL_RESULT_TOOL, total=2)])
    result = await gateway_for(model, retries=1).run("shop", "1 + 1?")
    assert result.structured == {"total": 2}
    told = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    again = f"Call {FINAL_RESULT_TOOL} again with a corrected answer."
    assert told == [
        f"Error: the answer does not fit the output schema: at total: 'two' is not of type "
        f"'number'. {again}",
        "Error: the answer does not fit the output schema: 'total' is a required property; "
        f"Additional properties are not allowed ('cost' was unexpected). {again}",
    ]


@pytest.mark.parametrize(
    "answer", ["About 425.", call(FINAL_RESULT_TOOL, total="many")], ids=["text", "final_result"]
)
async def test_max_iterations_holds_while_answers_are_sent_back(
    answer: str | ScriptedAnswer,
) -> None:
    """Each answer sent back to be corrected cost a model call: with more retries than
    iterations allowed, the item fails at max_iterations, having called the model that often."""
    model = ScriptedModel([answer] * 6)
    spec = AgentSpec(
        name="shop",
        model=model,
        options=AgentOptions(output=TOTAL, output_retries=5, max_iterations=2),
    )
    result = await Gateway([], [spec]).run("shop", "How much?")
    assert result.error is not None
    assert result.error.startswith("Max iterations (2) reached.")
    assert (len(model.calls), result.iterations) == (2, 2)


async def test_a_schema_failure_says_what_was_wrong_not_what_the_model_was_told() -> None:
    model = ScriptedModel(["About 425.", "Roughly 425 dollars."])
    result = await gateway_for(model, retries=1).run("shop", "How much?")
    assert result.error == (
        "the model's answer did not fit the output schema after 1 retry: "
        f"it was text, not JSON, and no call of {FINAL_RESULT_TOOL!r}"
    )
    told = model.calls[1][0][-1]
    assert f"give your final answer by calling the {FINAL_RESULT_TOOL!r} tool" in told.content


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("```json" + " " * 200_000 + "{", f"calling the {FINAL_RESULT_TOOL!r} tool"),
        ("[" * 3_000, "nested too deeply (3000 levels; at most 100)"),
    ],
    ids=["unclosed-fence-then-spaces", "nested-deeper-than-python-reads"],
)
async def test_a_degenerate_text_answer_goes_back_as_not_json(answer: str, why: str) -> None:
    """Read in linear time (a pattern took cubic time over the spaces) and, nested however
    deep, not a crash: told to the model, which answers again."""
    model = ScriptedModel([answer, call(FINAL_RESULT_TOOL, total=1)])
    result = await gateway_for(model, retries=1).run("shop", "How much?")
    assert result.structured == {"total": 1}
    told = model.calls[1][0][-1]
    assert why in told.content


async def test_a_structured_answer_keeps_its_text_as_written() -> None:
    """Its text (what `run` prints, what memory keeps, an MCP client's text content) is the
    JSON as the model wrote it: not with every non-ASCII character escaped."""
    named = OutputSchema.from_json_schema(
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    )
    model = ScriptedModel([call(FINAL_RESULT_TOOL, city="Zürich — 東京")])
    gateway = gateway_for(model, named)
    result = await gateway.run("shop", "Where?", session_id="s")
    assert result.output == '{"city": "Zürich — 東京"}'
    assert result.structured == {"city": "Zürich — 東京"}
    memory = gateway.agents["shop"].memory
    assert isinstance(memory, SessionMemory)
    assert (await memory.load("s")).messages[-1].content == '{"city": "Zürich — 東京"}'


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"total": NaN}', "not valid JSON (NaN is not a JSON number)"),
        ('{"total": 1e999}', "not valid JSON (1e999 is too large a number)"),
        ('{"total": ' + "[" * 200 + "]" * 200 + "}", "nested too deeply (201 levels; at most 100)"),
        ('{"total": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply (5001 levels; at most"),
    ],
    ids=["NaN", "1e999", "201 levels", "5001 levels"],
)
async def test_an_answer_written_as_json_no_reader_takes_goes_back_saying_why(
    text: str, why: str
) -> None:
    model = ScriptedModel([ScriptedAnswer(content=text), call(FINAL_RESULT_TOOL, total=425)])
    result = await gateway_for(model).run("shop", "How much?")
    assert result.structured == {"total": 425}
    told = model.calls[1][0][-1]
    assert isinstance(told, UserMessage)
    assert why in told.content


class Basket(BaseModel):
    items: list[str]
    total: float


async def test_a_pydantic_model_validates_and_shapes_the_answer() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, items=["shirt"], total="425")])
    result = await gateway_for(model, OutputSchema.from_model(Basket)).run("shop", "Basket?")
    assert Basket.model_validate(result.structured) == Basket(items=["shirt"], total=425.0)
    assert result.structured == {"items": ["shirt"], "total": 425.0}  # coerced by the model


async def test_an_answer_that_is_not_an_object_is_wrapped_for_the_tool() -> None:
    numbers = OutputSchema.from_json_schema({"type": "array", "items": {"type": "integer"}})
    model = ScriptedModel([call(FINAL_RESULT_TOOL, response=[1, 2, 3])])
    result = await gateway_for(model, numbers).run("shop", "Three numbers?")
    assert result.structured == [1, 2, 3]
    tool = model.calls[0][1][-1]
    assert tool.input_schema["required"] == ["response"]


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


async def test_a_recursive_models_answer_is_wrapped_with_its_definitions_at_the_root() -> None:
    """Its schema is a `$ref` into its `$defs`: wrapped whole, the ref pointed nowhere and every
    provider offered the tool an unconstrained `response`."""
    model = ScriptedModel([call(FINAL_RESULT_TOOL, response={"name": "a", "children": []})])
    result = await gateway_for(model, OutputSchema.from_model(Tree)).run("shop", "A tree?")
    assert result.structured == {"name": "a", "children": []}
    schema = model.calls[0][1][-1].input_schema
    assert schema["properties"] == {"response": {"$ref": "#/$defs/Tree"}}
    offered = object_root(schema).schema["properties"]["response"]  # what providers start from
    assert offered["required"] == ["name"]
    assert offered["properties"]["children"]["items"]["properties"]["name"] == {
        "title": "Name",
        "type": "string",
    }


async def test_a_small_model_writing_its_final_result_as_text_is_understood() -> None:
    # What a small model behind an OpenAI-compatible server answers: the call in `content`.
    content = '{"name": "final_result", "arguments": {"total": 425}}'
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "qwen2.5",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 12, "total_tokens": 62},
    }
    sent: list[Any] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        return httpx.Response(200, json=body)

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as client:
        model = OpenAICompatibleModel("http://127.0.0.1:8080/v1", "qwen2.5", http_client=client)
        result = await gateway_for(model).run("shop", "How much?")
    assert result.structured == {"total": 425}
    assert FINAL_RESULT_TOOL in [t["function"]["name"] for t in sent[0]["tools"]]


async def test_over_mcp_the_agent_declares_its_schema_and_returns_structured_content() -> None:
    model = ScriptedModel([call(FINAL_RESULT_TOOL, total=425)])
    async with Client(serve(gateway_for(model))) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("shop", {"prompt": "How much?"})
    schema = listed["shop"].output_schema
    assert schema is not None
    assert schema["properties"]["output"] == TOTAL.schema
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["output"] == {"total": 425}
    assert result.content == [types.TextContent(text='{"total": 425}')]


def test_config_takes_a_json_schema_and_refuses_a_broken_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps([{"tool_calls": [{"name": "final_result", "arguments": {"total": 3}}]}])
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[agents.shop]\nmodel = "scripted:{script}"\noutput_retries = 0\n'
        '[agents.shop.output_schema]\ntype = "object"\nrequired = ["total"]\n'
        '[agents.shop.output_schema.properties.total]\ntype = "integer"\n'
    )
    assert main(["run", "How much?", "--config", str(config)]) == 0
    assert capsys.readouterr().out == '{"total": 3}\n'
    with pytest.raises(ConfigError, match="not a valid JSON Schema"):
        parse_config({"agents": {"a": {"output_schema": {"type": "nonsense"}}}})
