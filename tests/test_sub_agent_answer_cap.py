"""A sub-agent's answer is a tool result to its caller: cut at its `max_output` (default
100,000 characters) with a tool result's notice, in what the calling model reads and in what a
stored run records; a handed-on answer is the user's answer, and is not cut."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import JsonValue

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.durable import open_runs
from gateway.run_state import RunState
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

pytestmark = pytest.mark.anyio

NOTICE = "\n... [truncated 200000 of 300000 chars]"


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, id="c1", arguments=arguments)])


def told(model: ScriptedModel) -> list[str]:
    """What the model read of its tools' results in its second call."""
    return [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]


def long_text(n: int) -> str:
    """`n` characters: a tool's result."""
    return "y" * n


async def test_a_sub_agents_long_answer_is_cut_as_a_tools_result_is() -> None:
    outer = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[
                    ScriptedCall(name="verbose", id="c1", arguments={"prompt": "go"}),
                    ScriptedCall(name="long_text", id="c2", arguments={"n": 300_000}),
                ]
            ),
            "done",
        ]
    )
    verbose = ScriptedModel(["x" * 300_000])
    gateway = Gateway(
        [FunctionToolkit("long_text", [function_tool(long_text)])],
        [AgentSpec("outer", outer, tools=["verbose", "long_text"]), AgentSpec("verbose", verbose)],
    )
    result = await gateway.run("outer", "go")
    assert result.output == "done"
    assert told(outer) == ["x" * 100_000 + NOTICE, "y" * 100_000 + NOTICE]


async def test_an_agents_max_output_from_its_config_caps_its_answer() -> None:
    config = parse_config({"agents": {"outer": {"tools": ["inner"]}, "inner": {"max_output": 10}}})
    outer = ScriptedModel([call("inner", prompt="go"), "done"])
    inner = ScriptedModel(["0123456789abcdef", "fits"])
    async with open_gateway(config) as built:
        assert built.agents["outer"].max_output == 100_000  # as a tool's default
        gateway = Gateway(
            [],
            [
                AgentSpec("outer", outer, tools=["inner"]),
                AgentSpec("inner", inner, max_output=built.agents["inner"].max_output),
            ],
        )
        await gateway.run("outer", "go")
    assert told(outer) == ["0123456789\n... [truncated 6 of 16 chars]"]


async def test_a_handed_on_answer_is_the_users_answer_whole() -> None:
    triage = ScriptedModel([call("billing")])
    billing = ScriptedModel(["z" * 300_000])
    gateway = Gateway(
        [],
        [AgentSpec("triage", triage, handoffs=["billing"]), AgentSpec("billing", billing)],
    )
    result = await gateway.run("triage", "my bill?")
    assert result.output == "z" * 300_000


async def test_a_stored_run_records_the_cut_answer(tmp_path: Path) -> None:
    outer = ScriptedModel([call("verbose", prompt="go"), "done"])
    verbose = ScriptedModel(["x" * 300_000])
    gateway = Gateway(
        [], [AgentSpec("outer", outer, tools=["verbose"]), AgentSpec("verbose", verbose)]
    )
    state = RunState(run_id=new_id(), agent="outer", items=[AgentItem(prompt="go")])
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        result = await runs.start(state)
        steps = await runs.steps(state.run_id)
    assert result.output == "done"
    [recorded] = [step.output for step in steps if step.name == "tool 0 c1"]
    assert isinstance(recorded, dict)
    assert recorded["data"] == {"response": "x" * 100_000 + NOTICE}
