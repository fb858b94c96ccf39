"""`runs show` renders every recorded call of a run as a tree (sub-agents nested, with their
inputs, outputs, usage and timings), and `--json` gives the same tree as data; `runs list
--status` filters; `runs prune` deletes old runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent import AssistantMessage, ToolCall
from gateway.cli import main
from gateway.durable.status import RunStep
from gateway.durable.tree import recorded_call
from tests.servers.openai_stub import openai_stub

CONFIG = """
[tools.calculator]
builtin = "calculator"
[agents.lead]
tools = ["helper"]
[agents.helper]
description = "Does sums."
tools = ["calculator"]
"""
SCRIPT = [
    {"tool_calls": [{"name": "helper", "id": "h1", "arguments": {"prompt": "6 * 7?"}}]},
    {"tool_calls": [{"name": "calculator", "id": "c1", "arguments": {"expression": "6 * 7"}}]},
    {"content": "It is 42."},
    {"content": "The helper says 42."},
]


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], script: list[Any]) -> str:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(script))
    command = ["run", "Ask the helper", "--config", str(config), "--agent", "lead", "--json"]
    main([*command, "--model", f"scripted:{answers}"])
    return json.loads(capsys.readouterr().out)["run_id"]


def test_show_nests_a_sub_agents_calls_under_its_tool_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _run(tmp_path, capsys, SCRIPT)
    assert main(["runs", "show", run_id, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["status"], shown["agent"]) == ("succeeded", "lead")
    assert shown["result"]["items"][0]["output"] == "The helper says 42."
    first, helper, last = shown["calls"]
    assert first["kind"] == "model"
    assert first["output"]["tool_calls"] == [
        {"id": "h1", "name": "helper", "arguments": {"prompt": "6 * 7?"}}
    ]
    assert first["usage"]["input_tokens"] > 0
    assert (helper["kind"], helper["name"], helper["call_id"]) == ("tool", "helper", "h1")
    assert helper["input"] == {"prompt": "6 * 7?"}
    assert helper["output"] == {"response": "It is 42."}
    assert helper["usage"]["requests"] == 2  # the helper's own model calls
    inner = helper["calls"]
    assert [c["kind"] for c in inner] == ["model", "tool", "model"]
    assert (inner[1]["name"], inner[1]["input"], inner[1]["output"]) == (
        "calculator",
        {"expression": "6 * 7"},
        {"response": "42"},
    )
    assert inner[2]["output"]["content"] == "It is 42."
    assert last["output"]["content"] == "The helper says 42."
    for call in (first, helper, last, *inner):
        assert isinstance(call["took_ms"], int)
        assert call["took_ms"] >= 0
    # The helper took as long as its own calls, from the first's start to its end.
    assert helper["started_ms"] == inner[0]["started_ms"]
    assert helper["started_ms"] + helper["took_ms"] >= inner[2]["started_ms"] + inner[2]["took_ms"]

    assert main(["runs", "show", run_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"run {run_id}  succeeded  agent lead  ")
    assert lines[1] == "question: Ask the helper"
    heads = [line.partition("─ ") for line in lines[2:] if "─ " in line]
    tree = [f"{indent}{bar}{call.split('  ')[0]}" for indent, bar, call in heads]
    assert tree == [
        "├─ model",
        "├─ tool helper",
        "│  ├─ model",
        "│  ├─ tool calculator",
        "│  └─ model",
        "└─ model",
    ]
    assert '│  │    input  {"expression": "6 * 7"}' in lines
    assert '│  │    output {"response": "42"}' in lines
    assert "│       It is 42." in lines
    assert lines[-2:][0] == "answer: The helper says 42."


HANDOFF_CONFIG = """
[agents.triage]
handoffs = ["billing"]
[agents.billing]
description = "Answers billing questions."
"""


CHAIN_CONFIG = """
[agents.triage]
handoffs = ["billing"]
[agents.billing]
handoffs = ["refunds"]
[agents.refunds]
description = "Handles refunds."
"""


def test_in_a_chain_of_handoffs_each_report_names_the_agent_that_answered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CHAIN_CONFIG)
    answers = tmp_path / "answers.json"
    hand: list[dict[str, Any]] = [
        {"tool_calls": [{"name": to, "arguments": {}}]} for to in ("billing", "refunds")
    ]
    answers.write_text(json.dumps([*hand, {"content": "Refunds here: 30 EUR."}]))
    command = ["run", "Money back", "--config", str(config), "--agent", "triage", "--json"]
    assert main([*command, "--model", f"scripted:{answers}"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert (ran["output"], ran["handoff"]) == ("Refunds here: 30 EUR.", "refunds")
    assert main(["runs", "show", ran["run_id"], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["result"]["items"][0]["handoff"] == "refunds"
    assert main(["runs", "show", ran["run_id"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "answer (handed off to refunds): Refunds here: 30 EUR." in lines


def test_run_json_and_show_say_whose_answer_a_handoff_gave(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(HANDOFF_CONFIG)
    answers = tmp_path / "answers.json"
    handing: dict[str, Any] = {"tool_calls": [{"name": "billing", "id": "b1", "arguments": {}}]}
    answers.write_text(json.dumps([handing, {"content": "You were charged 42."}]))
    command = ["run", "Why 42?", "--config", str(config), "--agent", "triage", "--json"]
    assert main([*command, "--model", f"scripted:{answers}"]) == 0
    ran = json.loads(capsys.readouterr().out)
    assert (ran["output"], ran["handoff"], ran["usage"]["requests"]) == (
        "You were charged 42.",
        "billing",
        2,
    )

    assert main(["runs", "show", ran["run_id"], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["result"]["items"][0]["handoff"] == "billing"
    assert [(c["kind"], c["name"]) for c in shown["calls"]] == [
        ("model", "model"),
        ("tool", "billing"),
    ]
    assert shown["calls"][1]["input"] == {}
    assert main(["runs", "show", ran["run_id"]]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "answer (handed off to billing): You were charged 42." in lines


def test_show_gives_a_failed_tool_calls_input_with_its_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [
        SCRIPT[0],
        {"tool_calls": [{"name": "calculator", "id": "c1", "arguments": {"expression": "1 / 0"}}]},
        {"content": "It cannot be done."},
        {"content": "The helper cannot."},
    ]
    run_id = _run(tmp_path, capsys, script)
    assert main(["runs", "show", run_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index('│  │    input  {"expression": "1 / 0"}')
    assert lines[at + 1].startswith("│  │    error: ")


def test_show_has_the_calls_the_agent_answered_itself_with_what_the_model_was_told(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Once only the calls the engine ran were there: a sub-agent's call of no such tool, or
    a call not run again, left no trace in a stored run."""
    twice = {"name": "calculator", "arguments": {"expression": "6 * 7"}}
    script = [
        SCRIPT[0],
        {
            "tool_calls": [
                {"name": "nosuch", "id": "n1"},
                {**twice, "id": "c1"},
                {**twice, "id": "c2"},
            ]
        },
        {"content": "It is 42."},
        {"content": "The helper says 42."},
    ]
    run_id = _run(tmp_path, capsys, script)
    assert main(["runs", "show", run_id]) == 0
    shown = capsys.readouterr().out.splitlines()
    heads = [line.split("─ ", 1)[1].split("  ")[:2] for line in shown if "─ tool" in line]
    assert heads == [
        ["tool helper", "h1"],
        ["tool nosuch", "n1"],
        ["tool calculator", "c2"],
        ["tool calculator", "c1"],
    ]  # in the order they ended: the calls answered at once first
    at = next(n for n, line in enumerate(shown) if "tool nosuch  n1" in line)
    assert shown[at + 1 : at + 3] == [
        "│  │    input  {}",
        "│  │    error: there is no tool named 'nosuch'. Available tools: calculator.",
    ]
    assert main(["runs", "show", run_id, "--json"]) == 0
    [helper] = [c for c in json.loads(capsys.readouterr().out)["calls"] if c["kind"] == "tool"]
    told = {c["call_id"]: (c["output"], c["error"]) for c in helper["calls"] if c["kind"] == "tool"}
    assert told == {
        "n1": (None, "there is no tool named 'nosuch'. Available tools: calculator."),
        "c1": ({"response": "42"}, None),
        "c2": (
            "Not run again: this answer already calls 'calculator' with these exact arguments "
            "(c1); that call's result is this one's too.",
            None,
        ),
    }


def test_a_failed_runs_show_ends_with_its_error_and_json_has_its_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG.replace("[agents.lead]", "[agents.lead]\nmax_iterations = 1"))
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([SCRIPT[1]]))
    command = ["run", "6 * 7?", "--config", str(config), "--agent", "lead", "--json"]
    assert main([*command, "--model", f"scripted:{answers}"]) == 1
    failed = json.loads(capsys.readouterr().out)
    assert main(["runs", "show", failed["run_id"]]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[-2] == f"answer error: {failed['error']}"
    assert shown[-1] == f"usage: {_tokens(shown[-1])}, 1 model call, 1 iteration"
    assert main(["runs", "show", failed["run_id"], "--json"]) == 0
    result = json.loads(capsys.readouterr().out)["result"]
    assert failed["error"].startswith("Max iterations (1) reached")
    assert [item["error"] for item in result["items"]] == [failed["error"]]


def test_show_counts_one_model_call_and_one_iteration_in_the_singular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _run(tmp_path, capsys, [{"content": "No need to ask."}])
    assert main(["runs", "show", run_id]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[-1] == f"usage: {_tokens(shown[-1])}, 1 model call, 1 iteration"
    stopped = _run(tmp_path, capsys, SCRIPT[:1])  # the helper has no answer: it stops
    assert main(["runs", "show", stopped]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == f"usage so far: {_tokens(last)}, 1 model call"


def _tokens(line: str) -> str:
    """The `N in / M out tokens` part of a usage line."""
    return line.split(": ", 1)[1].split(", ", 1)[0]


def test_list_filters_by_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    done = _run(tmp_path, capsys, SCRIPT)
    stopped = _run(tmp_path, capsys, SCRIPT[:1])  # then it has nothing more to say
    assert main(["runs", "list", "--status", "stopped", "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == [stopped]
    assert main(["runs", "list", "--status", "succeeded"]) == 0
    listed = capsys.readouterr().out.split()
    assert (listed[:2], listed[4:6]) == ([done, "succeeded"], ["UTC", "lead"])  # its time between
    with pytest.raises(SystemExit) as bad:
        main(["runs", "list", "--status", "paused"])
    assert bad.value.code == 2


def test_a_toolkit_calls_input_is_shown_as_the_model_wrote_it() -> None:
    # A call routed to a toolkit node carries the tool's name (`{**args, "tool": name}`).
    routed = {"path": "notes/a.txt", "tool": "fs__write_file"}
    step = RunStep(
        step_id=1,
        name="tool 0 call_1",
        output={"action": {"tool": "fs__write_file", "input": routed}, "data": "denied"},
        error=None,
        started_ms=0,
        completed_ms=1,
    )
    node = recorded_call(step)
    assert node is not None
    assert node.input == {"path": "notes/a.txt"}
    # The model's own argument named `tool` is kept beside the routed input (`displaced`).
    own = {"tool": "fs__search", "pattern": "*.txt"}
    action = {"tool": "fs__search", "input": own, "displaced": {"tool": "grep"}}
    step = RunStep(
        step_id=2,
        name="tool 0 call_2",
        output={"action": action, "data": "found"},
        error=None,
        started_ms=0,
        completed_ms=1,
    )
    node = recorded_call(step)
    assert node is not None
    assert node.input == {"tool": "grep", "pattern": "*.txt"}


def test_a_models_call_whose_arguments_were_not_json_shows_them_as_written() -> None:
    """Once shown as `{}`, the object the call was replayed with."""
    answer = AssistantMessage(
        content="", tool_calls=(ToolCall(id="c1", name="echo", invalid_arguments="{not json"),)
    )
    step = RunStep(
        step_id=1,
        name="model 0a1b #1",
        output=answer.model_dump(mode="json"),
        error=None,
        started_ms=0,
        completed_ms=1,
    )
    node = recorded_call(step)
    assert node is not None
    assert isinstance(node.output, dict)
    assert node.output["tool_calls"] == [{"id": "c1", "name": "echo", "arguments": "{not json"}]


def test_two_items_whose_calls_share_ids_keep_their_sub_agents_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each item's model says `h1` and `c1`: the second item's helper must not be given the
    first one's recorded calculator result, and `runs show` nests each helper's own calls."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    answers = tmp_path / "answers.json"
    script: list[Any] = []
    for question, sum_, total in (("6 * 7?", "6 * 7", "42"), ("2 + 2?", "2 + 2", "4")):
        script += [
            {"tool_calls": [{"name": "helper", "id": "h1", "arguments": {"prompt": question}}]},
            {"tool_calls": [{"name": "calculator", "id": "c1", "arguments": {"expression": sum_}}]},
            {"content": f"It is {total}."},
            {"content": f"The helper says {total}."},
        ]
    answers.write_text(json.dumps(script))
    items = tmp_path / "items.jsonl"
    items.write_text('"Ask the helper for 6 * 7"\n"Ask the helper for 2 + 2"\n')
    command = ["run", "--items", str(items), "--config", str(config), "--agent", "lead"]
    assert main([*command, "--model", f"scripted:{answers}", "--json"]) == 0
    *lines, ran = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["output"] for line in lines] == ["The helper says 42.", "The helper says 4."]
    assert main(["runs", "list", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert run["run_id"] == ran["run_id"]  # the run's line names it
    assert main(["runs", "show", run["run_id"], "--json"]) == 0
    calls = json.loads(capsys.readouterr().out)["calls"]
    helpers = [c for c in calls if c["kind"] == "tool"]
    assert [(h["item"], h["call_id"]) for h in helpers] == [(0, "h1"), (1, "h1")]
    sums = [[c["output"] for c in h["calls"] if c["kind"] == "tool"] for h in helpers]
    assert sums == [[{"response": "42"}], [{"response": "4"}]]


def test_the_models_thinking_is_in_the_trace_and_in_show(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    answers = [{"name": "calculator", "arguments": {"expression": "6 * 7"}}, "It is 42."]
    with openai_stub(answers, reasoning="Six sevens: use the calculator.") as model:
        command = ["run", "6 * 7?", "--config", str(config), "--agent", "helper"]
        assert main([*command, "--model", model.spec, "--json", "--trace-json"]) == 0
    printed = capsys.readouterr()
    ran = json.loads(printed.out)  # the answer on stdout, the trace beside it on stderr
    events = [json.loads(line) for line in printed.err.splitlines() if line.startswith("{")]
    calls = [e for e in events if e["kind"] == "model" and e["phase"] == "end"]
    assert [c["output"]["thinking"] for c in calls] == ["Six sevens: use the calculator."] * 2
    assert main(["runs", "show", ran["run_id"]]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown.count("│    thinking: Six sevens: use the calculator.") == 1
    assert shown.count("     thinking: Six sevens: use the calculator.") == 1  # under the last
    assert main(["runs", "show", ran["run_id"], "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["calls"][0]
    assert first["output"]["thinking"] == "Six sevens: use the calculator."


def test_prune_deletes_old_ended_runs_and_stopped_ones_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    done = _run(tmp_path, capsys, SCRIPT)
    stopped = _run(tmp_path, capsys, SCRIPT[:1])  # then it has nothing more to say

    def listed() -> set[str]:
        assert main(["runs", "list", "--json"]) == 0
        return {run["run_id"] for run in json.loads(capsys.readouterr().out)}

    assert main(["runs", "prune", "--older-than", "1", "--stopped", "--json"]) == 0
    # Too young; none skipped (an older version's pickled runs would be).
    assert _counts(capsys.readouterr().out) == {"finished": 0, "stopped": 0, "skipped": 0}
    assert listed() == {done, stopped}
    young = "0.000000001"  # days: everything here is older
    assert main(["runs", "prune", "--older-than", young]) == 0
    assert capsys.readouterr().err.startswith("deleted 1 finished run older than 1e-09 days from ")
    assert listed() == {stopped}  # resumable: kept unless asked
    assert main(["runs", "prune", "--older-than", young, "--stopped", "--json"]) == 0
    assert _counts(capsys.readouterr().out) == {"finished": 0, "stopped": 1, "skipped": 0}
    assert listed() == set()
    with pytest.raises(SystemExit) as bad:
        main(["runs", "prune", "--older-than", "0"])
    assert bad.value.code == 2


def _counts(printed: str) -> dict[str, Any]:
    """What `runs prune --json` says it deleted (and skipped); not the file's sizes."""
    shown = json.loads(printed)
    assert isinstance(shown.pop("bytes_before"), int)
    assert isinstance(shown.pop("bytes_after"), int)
    return shown


def test_a_stopped_runs_usage_counts_a_sub_agent_that_finished_beside_the_one_it_stopped_in(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`math` answers while `broken` (no answer left) stops the run, in one step: what math
    spent is the run's too, though the step did not end."""
    answers = {
        "top": [
            {
                "tool_calls": [
                    {"name": "math", "id": "m1", "arguments": {"prompt": "6 * 7?"}},
                    {"name": "broken", "id": "b1", "arguments": {"prompt": "x"}},
                ]
            },
            {"content": "done"},
        ],
        "math": [{"content": "It is 42, as six times seven makes."}],
        "broken": [],
    }
    config = tmp_path / "agent-gateway.toml"
    agents = ""
    for name, script in answers.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(script))
        tools = '["math", "broken"]' if name == "top" else "[]"
        agents += f'[agents.{name}]\nmodel = "scripted:{tmp_path / name}.json"\n'
        agents += f'description = "{name}"\ntools = {tools}\n'
    config.write_text(agents)
    main(["run", "go", "--config", str(config), "--agent", "top", "--json"])
    stopped = json.loads(capsys.readouterr().out)
    assert stopped["status"] == "stopped"
    assert main(["runs", "show", stopped["run_id"], "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)

    def model_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        found = [c["usage"] for c in calls if c["kind"] == "model" and c.get("usage")]
        return found + [u for c in calls for u in model_calls(c.get("calls") or [])]

    made = model_calls(shown["calls"])
    assert len(made) == 2  # top's and math's
    assert stopped["usage"]["requests"] == 2
    for field in ("input_tokens", "output_tokens"):
        assert stopped["usage"][field] == sum(u[field] for u in made)
    assert main(["runs", "show", stopped["run_id"]]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last == (
        f"usage so far: {stopped['usage']['input_tokens']} in / "
        f"{stopped['usage']['output_tokens']} out tokens, 2 model calls"
    )
