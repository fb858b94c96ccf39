"""A stored run's gated calls wait for `runs approve|deny` from another process: on SQLite and
PostgreSQL, with the step's other calls running meanwhile, three agents deep, and across a
kill -9 of the waiting process. Every call ends with exactly one result."""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path

import pytest

from tests.servers.openai_stub import openai_stub

from .cli_runs import cli, list_runs, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
)
AGENT = '[agents.assistant]\ntools = ["logged", "guarded"]\nrequire_approval = ["guarded"]\n'


async def test_a_call_waits_for_approval_from_another_process(tmp_path: Path, store: str) -> None:
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("guarded", "g1", log=str(log), name="G")]},
        {"content": "G is done"},
    )
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded")
        assert not log.exists()
        [waiting] = list_runs(store)
        assert waiting["status"] == "waiting_approval"
        assert [w["short"] for w in waiting["waiting"]] == ["g1"]
        approved = cli("runs", "approve", waiting["run_id"], "g1", "--store", store, "--json")
        assert approved.returncode == 0, approved.stderr
        assert approved.stderr.startswith('approved g1: guarded {"log"')
        # One JSON object (it printed none): the run, as `runs list --json`, and what was decided.
        shown = json.loads(approved.stdout)
        assert (shown["run_id"], shown["refused"]) == (waiting["run_id"], [])
        assert shown["status"] in ("waiting_approval", "running")  # its process goes on
        [decided] = shown["decided"]
        assert {key: decided[key] for key in ("short", "tool", "approved", "message")} == {
            "short": "g1",
            "tool": "guarded",
            "approved": True,
            "message": None,
        }
        assert decided["input"] == {"log": str(log), "name": "G"}
        assert await run.finish() == (0, "G is done\n")
    finally:
        await stop_run(run)
    assert log.read_text().splitlines() == ["start G", "end G"]
    assert list_runs(store)[0]["status"] == "succeeded"


async def test_a_denial_reaches_the_model_with_the_message(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    call = {"name": "guarded", "arguments": {"log": str(log), "name": "G"}}
    with openai_stub([call, "Fine, I will not."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(TOOLS + AGENT + f'model = "{model.spec}"\n')
        run = await start_run("go", "--config", str(config), "--store", store)
        try:
            await run.until("waiting for approval: guarded")
            [waiting] = list_runs(store)
            denied = cli(
                "runs",
                "deny",
                waiting["run_id"],
                "--message",
                "not today",
                "--store",
                store,
                "--json",
            )
            assert denied.returncode == 0, denied.stderr
            [decided] = json.loads(denied.stdout)["decided"]
            assert (decided["approved"], decided["message"]) == (False, "not today")
            assert await run.finish() == (0, "Fine, I will not.\n")
        finally:
            await stop_run(run)
        told = model.messages(1)[-1]
    assert told["role"] == "tool"
    assert told["content"] == (
        "The user rejected the tool call to guarded; it did not run. The user said: not today"
    )
    assert not log.exists()


async def test_an_approval_message_reaches_the_model_after_the_result_on_resume(
    tmp_path: Path,
) -> None:
    """`runs approve --message` from another process, and `resume` in a third: the model is
    told the call's result, then the person's words (they were echoed, then dropped)."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    call = {"name": "guarded", "arguments": {"log": str(log), "name": "G"}}
    with openai_stub([call, "Done, once."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(TOOLS + AGENT + f'model = "{model.spec}"\n')
        started = cli("run", "go", "--config", str(config), "--store", store, "--no-wait")
        assert started.returncode == 3, started.stderr
        [waiting] = list_runs(store)
        run_id = waiting["run_id"]
        approved = cli(
            "runs", "approve", run_id, "--message", "only this once", "--store", store, "--json"
        )
        assert approved.returncode == 0, approved.stderr
        [decided] = json.loads(approved.stdout)["decided"]
        assert (decided["approved"], decided["message"]) == (True, "only this once")
        resumed = cli("resume", run_id, "--store", store)
        assert (resumed.returncode, resumed.stdout) == (0, "Done, once.\n"), resumed.stderr
        told = model.messages(1)[-1]
    assert told["role"] == "tool"
    assert told["content"] == "G done\n\nThe user approved this call and said: only this once"
    assert log.read_text().splitlines() == ["start G", "end G"]


async def test_parallel_calls_approved_denied_and_ungated_each_get_one_result(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    three = [
        tool_call("logged", "a", log=str(log), name="A"),
        tool_call("guarded", "b", log=str(log), name="B"),
        tool_call("guarded", "c", log=str(log), name="C"),
    ]
    model = script_model(tmp_path / "s.json", {"tool_calls": three}, {"content": "A, B; not C"})
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded", count=2)
        await run.until("recorded tool 0 a")  # it ran while the others wait
        [waiting] = list_runs(store)
        assert sorted(w["short"] for w in waiting["waiting"]) == ["b", "c"]
        run_id = waiting["run_id"]
        assert (
            cli("runs", "deny", run_id, "c", "--message", "no C", "--store", store).returncode == 0
        )
        assert cli("runs", "approve", run_id, "b", "--store", store).returncode == 0
        assert await run.finish() == (0, "A, B; not C\n")
    finally:
        await stop_run(run)
    assert sorted(log.read_text().splitlines()) == ["end A", "end B", "start A", "start B"]
    shown = json.loads(cli("runs", "show", run_id, "--json", "--store", store).stdout)
    tools = {c["call_id"]: c for c in shown["calls"] if c["kind"] == "tool"}
    assert {call: tool["output"] for call, tool in tools.items()} == {
        "a": {"response": "A done"},
        "b": {"response": "B done"},
        "c": "The user rejected the tool call to guarded; it did not run. The user said: no C",
    }
    assert tools["a"]["approval"] is None
    decided = {call: tools[call]["approval"] for call in ("b", "c")}
    assert {call: (d["approved"], d["message"]) for call, d in decided.items()} == {
        "b": (True, None),
        "c": (False, "no C"),
    }
    assert all(d["by"].endswith(f"@{socket.gethostname()}") for d in decided.values())
    assert all(isinstance(d["at_ms"], int) for d in decided.values())


async def test_an_approval_three_agents_deep_surfaces_on_the_outermost_run(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        TOOLS
        + '[agents.lead]\ntools = ["middle"]\n[agents.middle]\ntools = ["leaf"]\n'
        + '[agents.leaf]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
    )
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("middle", "m1", prompt="ask the leaf")]},
        {"tool_calls": [tool_call("leaf", "l1", prompt="write W")]},
        {"tool_calls": [tool_call("guarded", "w1", log=str(log), name="W")]},
        {"content": "leaf: W written"},
        {"content": "middle: the leaf wrote W"},
        {"content": "lead: done"},
    )
    args = ["go", "--config", str(config), "--store", store, "--agent", "lead", "--model", model]
    run = await start_run(*args)
    try:
        await run.until("waiting for approval: guarded")
        assert "runs approve" in run.err
        assert "m1/l1/w1" in run.err
        [waiting] = list_runs(store)
        assert (waiting["agent"], waiting["status"]) == ("lead", "waiting_approval")
        [asked] = waiting["waiting"]
        assert (asked["short"], asked["agents"]) == ("m1/l1/w1", ["lead", "middle", "leaf"])
        assert cli("runs", "approve", waiting["run_id"], "--store", store).returncode == 0
        assert await run.finish() == (0, "lead: done\n")
    finally:
        await stop_run(run)
    assert log.read_text().splitlines() == ["start W", "end W"]


async def test_approvals_asked_by_sub_agents_in_parallel_are_all_listed(tmp_path: Path) -> None:
    """Each sub-agent asks when its own model has answered: a wait already begun for one
    call's decision must not keep a later call from being listed."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    leaves = [{"name": "leaf", "arguments": {"prompt": f"write W{n}"}} for n in (1, 2, 3)]
    # The leaves ask their model in any order: any leaf may get any of these answers.
    writes = [
        {"name": "guarded", "arguments": {"log": str(log), "name": f"W{n}"}} for n in (1, 2, 3)
    ]
    answers = [leaves, *writes, *["leaf: written"] * 3, "lead: all three written"]
    # The third leaf's model answers once the other two calls wait for their decisions.
    with openai_stub(answers, hold_at=4) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(
            TOOLS + f'[agents.lead]\nmodel = "{model.spec}"\ntools = ["leaf"]\n'
            f'[agents.leaf]\nmodel = "{model.spec}"\ntools = ["guarded"]\n'
            'require_approval = ["guarded"]\n'
        )
        run = await start_run("go", "--config", str(config), "--store", store, "--agent", "lead")
        try:
            await run.until("waiting for approval: guarded", count=2)
            model.release()
            await run.until("waiting for approval: guarded", count=3)
            [waiting] = list_runs(store)
            assert waiting["status"] == "waiting_approval"
            assert len(waiting["waiting"]) == 3
            assert cli("runs", "approve", waiting["run_id"], "--store", store).returncode == 0
            assert await run.finish() == (0, "lead: all three written\n")
        finally:
            await stop_run(run)
    assert sorted(log.read_text().splitlines()) == sorted(
        f"{step} W{n}" for n in (1, 2, 3) for step in ("start", "end")
    )


async def test_run_json_of_a_run_interrupted_while_a_call_waits_says_what_runs_list_says(
    tmp_path: Path,
) -> None:
    """Ctrl-C while a sub-agent's call waits for a person: the call still waits, in the
    store, and `run --json` words the run's status as `runs list` does, listing the call."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    leaf = script_model(
        tmp_path / "leaf.json", {"tool_calls": [tool_call("guarded", "w1", log=str(log), name="W")]}
    )
    lead = script_model(
        tmp_path / "lead.json", {"tool_calls": [tool_call("leaf", "l1", prompt="write W")]}
    )
    config.write_text(
        TOOLS + f'[agents.lead]\nmodel = "{lead}"\ntools = ["leaf"]\n'
        f'[agents.leaf]\nmodel = "{leaf}"\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
    )
    run = await start_run(
        "go", "--config", str(config), "--store", store, "--agent", "lead", "--json"
    )
    try:
        await run.until("waiting for approval: guarded")
        run.process.send_signal(signal.SIGINT)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130
    shown = json.loads(out)
    [listed] = list_runs(store)
    assert (shown["status"], listed["status"]) == ("waiting_approval", "waiting_approval")
    assert [w["short"] for w in shown["waiting"]] == [w["short"] for w in listed["waiting"]]
    assert [w["short"] for w in shown["waiting"]] == ["l1/w1"]
    assert shown["error"].startswith(
        f"interrupted: the run is stored: agent-gateway resume {shown['run_id']}"
    )


@pytest.mark.parametrize("stop", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
async def test_a_run_stopped_while_waiting_for_approval_resumes_after_it(
    tmp_path: Path, store: str, stop: signal.Signals
) -> None:
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    two = [
        tool_call("logged", "a", log=str(log), name="A"),
        tool_call("guarded", "b", log=str(log), name="B"),
    ]
    first = script_model(tmp_path / "first.json", {"tool_calls": two})
    run = await start_run("go", "--config", str(config), "--store", store, "--model", first)
    try:
        await run.until("waiting for approval: guarded", "recorded tool 0 a")
        run.process.send_signal(stop)
        assert await run.process.wait() == (-stop if stop == signal.SIGKILL else 130)
    finally:
        await stop_run(run)
    [waiting] = list_runs(store)
    assert waiting["status"] == "waiting_approval"  # the call still waits, in the store
    assert [w["short"] for w in waiting["waiting"]] == ["b"]
    assert waiting["error"] in (
        "interrupted",
        f"its process ({waiting['pid']}) ended before the run did",
    )
    run_id = waiting["run_id"]
    approved = cli("runs", "approve", run_id, "b", "--store", store)
    assert approved.returncode == 0, approved.stderr
    assert f"`agent-gateway resume {run_id} --store " in approved.stderr  # to paste as it is

    second = script_model(tmp_path / "second.json", {"content": "A and B are done"})
    resumed = cli("resume", run_id, "--store", store, "--model", second)
    assert (resumed.returncode, resumed.stdout) == (0, "A and B are done\n"), resumed.stderr
    assert "waiting for approval" not in resumed.stderr  # the decision was in the store
    # A had finished before the kill: not run again; B ran once, after the approval.
    assert log.read_text().splitlines() == ["start A", "end A", "start B", "end B"]
