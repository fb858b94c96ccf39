"""A run's context: the system message made from it, local tools told of it, kept with the run."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

import pytest
from pydantic import JsonValue, ValidationError

from agent import (
    AgentItem,
    AgentOptions,
    InProcessStore,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    SystemMessage,
)
from gateway import AgentSpec, Gateway, RunState
from gateway.cli import main
from gateway.run_state import stored_state
from tests.sample_tools import whose_call
from toolkits import CallInfo, FunctionToolkit, function_tool

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def system_of(model: ScriptedModel, turn: int = 0) -> str:
    first = model.calls[turn][0][0]
    assert isinstance(first, SystemMessage)
    return first.content


def agent(model: ScriptedModel, system: object, **more: object) -> AgentSpec:
    return AgentSpec(
        name="helper",
        model=model,
        options=AgentOptions(system_message=system),  # pyright: ignore[reportArgumentType]
        **more,  # pyright: ignore[reportArgumentType]
    )


async def test_the_system_message_reads_the_runs_context() -> None:
    model = ScriptedModel(["Hello."])
    system = (
        "You help {{ context.customer.name }} (plan {{context.plan}}, tags {{ context.tags }}, "
        "first {{ context.tags.0 }}). Today is {{ date }}, now {{ now }}. "
        'Answer as JSON like {"a": 1}; {{ other }} and {{ context.customer.name } stay.'
    )
    gateway = Gateway([], [agent(model, system)])
    before = datetime.now(UTC).replace(microsecond=0)
    context: dict[str, JsonValue] = {
        "customer": {"name": "Ada"},
        "plan": 3,
        "tags": ["vip", "eu"],
    }
    result = await gateway.run("helper", "Hi", context=context)
    after = datetime.now(UTC)
    assert result.output == "Hello."
    said = system_of(model)
    match = re.fullmatch(
        r"You help Ada \(plan 3, tags \[\"vip\", \"eu\"\], first vip\)\. Today is "
        r"(\d{4}-\d\d-\d\d), now (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)\. "
        r'Answer as JSON like \{"a": 1\}; \{\{ other \}\} and \{\{ context\.customer\.name \} '
        r"stay\.",
        said,
    )
    assert match is not None, said
    now = datetime.strptime(match.group(2), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before <= now <= after
    assert match.group(1) == now.strftime("%Y-%m-%d")


async def test_a_placeholder_the_context_lacks_fails_the_item_before_its_model_call() -> None:
    model = ScriptedModel([])  # any call would be ScriptExhausted
    gateway = Gateway([], [agent(model, "You help {{ context.customer.name }}.")])
    items = [
        AgentItem(prompt="a", context={"customer": {"id": 7}}),
        AgentItem(prompt="b"),
    ]
    result = await gateway.run("helper", items)
    assert [item.error for item in result.items] == [
        "the system message uses {{ context.customer.name }}, but the run's context has no "
        "'name' in context.customer (which has the keys id): give it in the run's context",
        "the system message uses {{ context.customer.name }}, but the run's context has no "
        "'customer' in context (which has no keys): give it in the run's context",
    ]
    assert model.calls == []


async def test_a_system_message_function_gets_each_items_context_and_memory_keeps_no_system() -> (
    None
):
    seen: list[dict[str, JsonValue]] = []

    async def instructions(context: dict[str, JsonValue]) -> str:
        seen.append(context)
        context["changed"] = True  # a copy: the run's own context stays as given
        return f"Speak {context.get('language', 'English')}."

    model = ScriptedModel(["Hola.", "Hello."])
    memory = SessionMemory(InProcessStore())
    gateway = Gateway([], [agent(model, instructions)], memory=memory)
    items = [
        AgentItem(prompt="Hi", session_id="s1", context={"language": "Spanish"}),
        AgentItem(prompt="Hi"),
    ]
    result = await gateway.run("helper", items)
    assert [item.output for item in result.items] == ["Hola.", "Hello."]
    assert [system_of(model, 0), system_of(model, 1)] == ["Speak Spanish.", "Speak English."]
    assert seen == [{"language": "Spanish", "changed": True}, {"changed": True}]
    assert items[0].context == {"language": "Spanish"}
    history = await memory.load("s1")
    assert [m.content for m in history.messages] == ["Hi", "Hola."]  # no system message


async def test_a_system_message_function_that_fails_fails_its_item_alone() -> None:
    def instructions(context: dict[str, JsonValue]) -> str:
        if context.get("broken"):
            return cast(str, 42)  # what users' code may do, whatever its annotation
        return f"For {context['customer']}."

    model = ScriptedModel(["Hello Ada."])
    gateway = Gateway([], [agent(model, instructions)])
    items = [
        AgentItem(prompt="a", context={"customer": "Ada"}),
        AgentItem(prompt="b"),
        AgentItem(prompt="c", context={"broken": True}),
    ]
    result = await gateway.run("helper", items)
    assert [(item.output, item.error) for item in result.items] == [
        ("Hello Ada.", None),
        (None, "the system message function failed: KeyError: 'customer'"),
        (None, "the system message function returned int, not a str"),
    ]
    assert [system_of(model)] == ["For Ada."]
    assert len(model.calls) == 1


async def test_run_context_is_every_items_that_has_none_of_its_own() -> None:
    model = ScriptedModel(["1", "2"])
    gateway = Gateway([], [agent(model, "For {{ context.who }}.")])
    items = [AgentItem(prompt="a", context={"who": "own"}), AgentItem(prompt="b")]
    await gateway.run("helper", items, context={"who": "run"})
    assert [system_of(model, 0), system_of(model, 1)] == ["For own.", "For run."]


@pytest.mark.parametrize(
    "context",
    [{"limit": float("nan")}, {"limits": [1, {"high": float("inf")}]}, {"low": -float("inf")}],
    ids=["nan", "nested-infinity", "minus-infinity"],
)
async def test_a_context_holding_nan_or_infinity_is_refused_before_anything_runs(
    context: dict[str, JsonValue],
) -> None:
    """Once taken in Python: the model read `limit=NaN`, the stored run held `null`, and the
    same run resumed told its model `limit=null`. JSON has neither, as the CLI and MCP say."""
    model = ScriptedModel(["never asked"])
    saved: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        saved.append(state)

    gateway = Gateway([], [agent(model, "limit={{ context }}")])
    with pytest.raises(ValidationError, match="finite number"):
        await gateway.run("helper", "go", context=context, checkpoint=checkpoint)
    with pytest.raises(ValidationError, match="finite number"):
        AgentItem(prompt="go", context=context)
    assert model.calls == []
    assert saved == []


async def test_a_local_tool_is_told_the_call_it_serves_not_in_its_schema() -> None:
    tool = function_tool(whose_call)
    assert list(tool.input_schema["properties"]) == ["question"]
    assert tool.input_schema["required"] == ["question"]
    model = ScriptedModel(
        [
            call("whose_call", question="q", info={"forged": True}),
            call("whose_call", question="q"),
            "done",
        ]
    )
    spec = AgentSpec(name="helper", model=model, tools=["who"])
    gateway = Gateway(
        [FunctionToolkit("who", [tool])], [spec], memory=SessionMemory(InProcessStore())
    )
    result = await gateway.run(
        "helper", "Who?", session_id="s9", context={"customer": "Ada"}, started_by="alice"
    )
    sent = model.calls[2][0]  # system, question, call, result, call, result
    forged, told = sent[3].content, sent[5].content
    assert "info" in forged
    assert "Extra inputs are not permitted" in forged
    assert json.loads(told) == {
        "question": "q",
        "context": {"customer": "Ada"},
        "agent": "helper",
        "session_id": "s9",
        "run_id": result.run_id,
    }


async def test_a_call_outside_a_run_gets_an_empty_call_info() -> None:
    got: list[CallInfo] = []

    @function_tool
    def record(info: CallInfo | None = None) -> str:
        """Record the call."""
        assert info is not None
        got.append(info)
        return "ok"

    assert "properties" not in record.input_schema or not record.input_schema["properties"]
    gateway = Gateway([FunctionToolkit("record", [record])])
    await gateway.call_tool("record", {}, subject="bob")
    assert got == [CallInfo(subject="bob")]


async def test_an_agent_run_as_a_tool_has_its_calling_items_context() -> None:
    inner_model = ScriptedModel(["Inner answer."])
    inner = AgentSpec(
        name="inner",
        model=inner_model,
        options=AgentOptions(system_message="Inner for {{ context.customer }}."),
    )
    outer_model = ScriptedModel([call("inner", prompt="Ask"), "Outer answer."])
    outer = AgentSpec(name="outer", model=outer_model, tools=["inner"])
    gateway = Gateway([], [outer, inner])
    result = await gateway.run("outer", "Go", context={"customer": "Ada"})
    assert result.output == "Outer answer."
    assert system_of(inner_model) == "Inner for Ada."


async def test_a_stored_run_resumed_elsewhere_keeps_its_context() -> None:
    saved: list[str] = []

    async def checkpoint(state: RunState) -> None:
        saved.append(state.model_dump_json())

    first = ScriptedModel([call("whose_call", question="q")])  # then exhausted: the run stops
    tools = FunctionToolkit("who", [function_tool(whose_call)])
    spec = AgentSpec(
        name="helper",
        model=first,
        tools=["who"],
        options=AgentOptions(system_message="For {{ context.customer }}."),
    )
    with pytest.raises(Exception, match="has 1 answers and was asked for answer 2"):
        await Gateway([tools], [spec]).run(
            "helper", "Who?", context={"customer": "Ada"}, checkpoint=checkpoint
        )
    stored = json.loads(saved[-1])
    assert stored["items"] == [
        {"prompt": "Who?", "session_id": None, "context": {"customer": "Ada"}}
    ]
    # Another process: a new gateway, the state read back from what the store holds.
    second = ScriptedModel(["It is Ada."])
    again = Gateway(
        [tools], [AgentSpec(name="helper", model=second, tools=["who"], options=spec.options)]
    )
    result = await again.resume(stored_state(saved[-1], "r1"))
    assert result.output == "It is Ada."
    assert system_of(second) == "For Ada."
    told = second.calls[0][0][-1].content
    assert json.loads(told)["context"] == {"customer": "Ada"}


def test_an_item_without_context_is_stored_as_before() -> None:
    older = '{"version": 1, "run_id": "r", "agent": "a", "items": [{"prompt": "p"}]}'
    state = stored_state(older, "r")
    assert state.items[0].context is None
    assert json.loads(state.model_dump_json())["items"] == [{"prompt": "p", "session_id": None}]


def test_run_context_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    answers = [{"tool_calls": [{"name": "who", "arguments": {"question": "q"}}]}, {"content": "ok"}]
    script.write_text(json.dumps(answers))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.who]\npython = "tests.sample_tools:whose_call"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["who"]\n'
        'system = "For {{ context.customer }}."\n'
    )
    base = ["run", "Who?", "--no-store", "--config", str(config), "--json"]
    assert main([*base, "--context", '{"customer": "Ada"}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == "ok"
    assert json.loads(out["steps"][0]["observation"])["context"] == {"customer": "Ada"}

    # The `call` of an agent takes its served arguments, `context` among them.
    script.write_text(json.dumps(answers))
    called = '{"prompt": "Who?", "context": {"customer": "Bo"}}'
    assert main(["call", "a", "--args", called, "--config", str(config), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert json.loads(out["steps"][0]["observation"])["context"] == {"customer": "Bo"}

    assert main([*base, "--context", '["Ada"]']) == 2
    assert capsys.readouterr().err.endswith(
        'error: --context must be a JSON object ({"key": ...}), not \'["Ada"]\'\n'
    )
    assert main([*base, "--context", "{customer: Ada}"]) == 2
    assert "error: --context is not JSON: Expecting property name" in capsys.readouterr().err
    # NaN and Infinity are no JSON, as the config says: refused, not stored as null.
    for bad, said in (('{"a": NaN}', "NaN"), ('{"b": [Infinity]}', "Infinity")):
        assert main([*base, "--context", bad]) == 2
        assert capsys.readouterr().err.endswith(
            f"error: --context is not valid JSON ({said} is not a JSON number)\n"
        )
    lines = tmp_path / "items.jsonl"
    lines.write_text('{"prompt": "Who?", "context": {"n": -Infinity}}\n')
    items = ["run", "--items", str(lines), "--no-store", "--config", str(config)]
    assert main(items) == 2
    assert "(-Infinity is not a JSON number)" in capsys.readouterr().err


def test_a_call_of_an_agent_takes_its_context_as_an_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "answers.json"
    answers = [{"tool_calls": [{"name": "who", "arguments": {"question": "q"}}]}, {"content": "ok"}]
    script.write_text(json.dumps(answers))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.who]\npython = "tests.sample_tools:whose_call"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["who"]\n'
        'system = "For {{ context.customer }}."\n'
    )
    call = ["call", "a", "--args", '{"prompt": "Who?"}', "--config", str(config), "--json"]
    assert main([*call, "--context", '{"customer": "Cy"}']) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["output"] == "ok"
    assert json.loads(out["steps"][0]["observation"])["context"] == {"customer": "Cy"}

    twice = ["call", "a", "--args", '{"prompt": "Who?", "context": {}}', "--config", str(config)]
    assert main([*twice, "--context", '{"customer": "Cy"}']) == 2
    assert capsys.readouterr().err.endswith(
        "error: give the context once: in --args or with --context, not both\n"
    )
    tool = ["call", "who", "--args", '{"question": "q"}', "--config", str(config)]
    assert main([*tool, "--context", '{"customer": "Cy"}']) == 2
    assert "error: --context is the run context of an agent called; 'who' is no agent" in (
        capsys.readouterr().err
    )
    assert main([*call, "--context", "[1]"]) == 2
    assert "error: --context must be a JSON object" in capsys.readouterr().err
