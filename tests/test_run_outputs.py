"""What `run` hands a script: item lines as items finish, the run's line after them, and a run
that returns when a call needs approval (`--no-wait`), to be decided and resumed."""

from __future__ import annotations

import json
import re
from io import StringIO
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent import (
    AgentItem,
    InProcessStore,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
)
from gateway import AgentSpec, Gateway
from gateway.cli import main
from gateway.cli.items import ItemLines
from gateway.cli.results import stopped_chain
from gateway.errors import GatewayError
from gateway.item_results import EMPTY_ANSWER
from gateway.run_state import RunState
from toolkits import FunctionToolkit, function_tool

TOOLS = (
    '[tools.interrupt]\npython = "tests.sample_tools:interrupt_me"\n'
    '[tools.guarded]\npython = "tests.sample_tools:shout"\n'
)


def script(path: Path, *answers: Any) -> str:
    path.write_text(json.dumps(list(answers)))
    return f"scripted:{path}"


def printed(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.anyio
async def test_an_items_line_is_printed_as_its_item_finishes() -> None:
    """Every line came out together once the last item ended."""
    out = StringIO()
    seen_by_the_second: list[str] = []

    async def look() -> str:
        seen_by_the_second.append(out.getvalue())  # while the second item is still at work
        return "looked"

    lines = ItemLines("r", "a", 2, summary=False).writing_to(out)
    model = ScriptedModel(["one", ScriptedAnswer(tool_calls=[ScriptedCall(name="look")]), "two"])
    toolkit = FunctionToolkit("fns", [function_tool(look)])
    gateway = Gateway([toolkit], [AgentSpec("a", model, tools=["fns"])])
    with anyio.fail_after(10):
        result = await gateway.run(
            "a", [AgentItem(prompt="1"), AgentItem(prompt="2")], hooks=[lines]
        )
    assert seen_by_the_second == ['{"index": 0, "output": "one", "error": null}\n']
    assert lines.finished(result) == 0
    assert printed(out.getvalue()) == [
        {"index": 0, "output": "one", "error": None},
        {"index": 1, "output": "two", "error": None},
    ]  # each once


@pytest.mark.anyio
@pytest.mark.parametrize("empty", ["", " \n"], ids=["empty", "white space"])
async def test_a_question_answered_by_nothing_leaves_no_turn_in_its_session(empty: str) -> None:
    """The run fails it: the session's later turns must not read it as answered (n8n saves a
    turn only when there is an output)."""
    memory = SessionMemory(InProcessStore())
    model = ScriptedModel([empty, "Paris."])
    gateway = Gateway([], [AgentSpec("a", model, memory=memory)])
    failed = await gateway.run("a", "The capital of France?", session_id="s")
    assert failed.items[0].error == EMPTY_ANSWER
    assert (await memory.load("s")).messages == []
    answered = await gateway.run("a", "The capital of France, please?", session_id="s")
    assert answered.output == "Paris."
    asked = [m.content for m in model.calls[-1][0]]
    assert asked[1:] == ["The capital of France, please?"]
    kept = [m.content for m in (await memory.load("s")).messages]
    assert kept == ["The capital of France, please?", "Paris."]


@pytest.mark.anyio
async def test_an_empty_answer_is_its_items_failure_in_its_line_as_in_the_result() -> None:
    """The step loop fails an item that answered nothing; its line, printed while the other
    item works on, says the same as the run's result (not `output: ""`, `error: null`)."""
    out = StringIO()
    seen_by_the_second: list[str] = []

    async def look() -> str:
        seen_by_the_second.append(out.getvalue())
        return "looked"

    lines = ItemLines("r", "a", 2, summary=True).writing_to(out)
    model = ScriptedModel(["", ScriptedAnswer(tool_calls=[ScriptedCall(name="look")]), "two"])
    toolkit = FunctionToolkit("fns", [function_tool(look)])
    gateway = Gateway([toolkit], [AgentSpec("a", model, tools=["fns"])])
    with anyio.fail_after(10):
        result = await gateway.run(
            "a", [AgentItem(prompt="1"), AgentItem(prompt="2")], hooks=[lines]
        )
    failed = {"index": 0, "output": None, "error": EMPTY_ANSWER}
    assert [printed(seen) for seen in seen_by_the_second] == [[failed]]
    assert (result.items[0].error, result.items[0].output) == (EMPTY_ANSWER, None)
    assert lines.finished(result) == 1
    *items, run = printed(out.getvalue())
    assert items == [failed, {"index": 1, "output": "two", "error": None}]  # each once
    assert (run["status"], run["finished"], run["failed"]) == ("succeeded", 2, 1)


def test_items_json_ends_with_the_runs_line_whether_it_succeeds_or_is_interrupted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Success gave item lines with no run id or usage; an interrupted run gave one object
    with `output: null` instead, and the items that had finished were never printed."""
    config = tmp_path / "c.toml"
    config.write_text(TOOLS + '[agents.a]\ntools = ["interrupt"]\n')
    items = tmp_path / "items.jsonl"
    items.write_text('"first"\n"second"\n"third"\n')
    store = ["--state-dir", str(tmp_path / "state")]
    run = ["run", "--items", str(items), "--config", str(config), "--agent", "a", *store]

    model = script(tmp_path / "ok.json", {"content": "one"}, {"content": "two"}, {"content": "3"})
    assert main([*run, "--model", model, "--json"]) == 0
    *answers, last = printed(capsys.readouterr().out)
    assert [line["output"] for line in answers] == ["one", "two", "3"]
    run_id = last["run_id"]
    assert last == {
        "run_id": run_id,
        "agent": "a",
        "status": "succeeded",
        "error": None,
        "items": 3,
        "finished": 3,
        "failed": 0,
        "usage": last["usage"],
        "iterations": 3,
    }
    assert last["usage"]["requests"] == 3
    assert main(["runs", "show", run_id, *store]) == 0  # the run it names is stored
    capsys.readouterr()

    interrupted: dict[str, Any] = {"tool_calls": [{"name": "interrupt", "arguments": {}}]}
    model = script(tmp_path / "int.json", {"content": "one"}, {"content": "two"}, interrupted)
    for json_option in ([], ["--json"]):
        assert main([*run, "--model", model, *json_option]) == 130
        out, err = capsys.readouterr()
        lines = printed(out)
        assert lines[:2] == [
            {"index": 0, "output": "one", "error": None},
            {"index": 1, "output": "two", "error": None},
        ]  # what finished is out
        said = re.fullmatch(r"interrupted: run (\w+) is stored: agent-gateway resume \1 .*\n", err)
        assert said is not None, err  # a line of its own: no blank line first
        if json_option:
            [last] = lines[2:]
            assert (last["run_id"], last["status"]) == (said.group(1), "stopped")
            assert (last["finished"], last["failed"]) == (2, 0)
            assert last["error"].startswith("interrupted: the run is stored")
            assert last["stopped_in"] is None  # its own agent's run, as `run --json` says
            assert last["usage"]["requests"] >= 2
        else:
            assert len(lines) == 2


def test_no_wait_leaves_a_run_waiting_for_approval_to_be_decided_then_resumed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script's run blocked until someone decided, and no exit code said it waits."""
    config = tmp_path / "c.toml"
    config.write_text(TOOLS + '[agents.a]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n')
    store = ["--state-dir", str(tmp_path / "state")]
    call = {"tool_calls": [{"name": "guarded", "id": "c1", "arguments": {"text": "hi"}}]}
    model = script(tmp_path / "s.json", call)
    run = ["run", "go", "--config", str(config), "--model", model, "--no-wait", "--json", *store]

    assert main(run) == 3
    out, err = capsys.readouterr()
    shown = json.loads(out)
    run_id = shown["run_id"]
    assert shown["status"] == "waiting_approval"
    assert [(w["short"], w["call"], w["tool"], w["input"]) for w in shown["waiting"]] == [
        ("c1", "tool 0 c1", "guarded", {"text": "hi"})  # as the README names them
    ]
    assert f"agent-gateway runs approve {run_id} c1" in err
    assert f"run {run_id} waits for approval (--no-wait): once decided, agent-gateway resume" in err

    assert main(["runs", "list", "--json", *store]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert (listed["run_id"], listed["status"]) == (run_id, "waiting_approval")
    assert main(["runs", "approve", run_id, "tool 0 c1", *store]) == 0  # `c1` would do too
    capsys.readouterr()
    then = script(tmp_path / "then.json", {"content": "It said HI."})  # a new process's script
    assert main(["resume", run_id, "--no-wait", "--model", then, *store]) == 0
    assert capsys.readouterr().out == "It said HI.\n"


@pytest.mark.parametrize("how", ["run", "call"])
def test_an_unstored_run_interrupted_prints_the_json_object_it_promised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """`run --no-store --json` and `call AGENT --json` printed nothing when interrupted."""
    config = tmp_path / "c.toml"
    config.write_text(TOOLS + '[agents.a]\ntools = ["interrupt"]\n')
    model = script(tmp_path / "int.json", {"tool_calls": [{"name": "interrupt", "arguments": {}}]})
    common = ["--config", str(config), "--model", model, "--json"]
    if how == "run":
        command = ["run", "go", "--agent", "a", "--no-store", *common]
    else:
        command = ["call", "a", "--args", '{"prompt": "go"}', *common]
    assert main(command) == 130
    [shown] = printed(capsys.readouterr().out)
    assert shown["run_id"] is None  # nothing was stored
    assert shown["status"] == "failed"
    assert shown["output"] is None
    assert shown["error"].startswith("interrupted: the run was not stored")
    assert shown["steps"] == [] or shown["steps"][0]["tool"] == "interrupt"


def test_an_interrupted_runs_stopped_in_goes_as_far_down_as_its_sub_agents_in_flight_agree() -> (
    None
):
    def run(agent: str, *children: RunState) -> RunState:
        below = {f"0 c{n}": child for n, child in enumerate(children)}
        return RunState(run_id="r", agent=agent, items=[AgentItem(prompt="q")], children=below)

    interrupted = GatewayError("interrupted")
    deep = run("top", run("mid", run("leaf"), run("leaf")))
    apart = run("top", run("mid", run("leaf"), run("other")))
    assert stopped_chain(interrupted, deep, "stopped") == ["top", "mid", "leaf"]
    assert stopped_chain(interrupted, apart, "stopped") == ["top", "mid"]
    assert stopped_chain(interrupted, run("top", run("a"), run("b")), "stopped") is None
    assert stopped_chain(interrupted, deep, "failed") is None  # not stored: it has ended
