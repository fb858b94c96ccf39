"""Approval across a nested gateway over MCP: gateway A's stored run calls gateway B's agent
(B a `serve --stdio` subprocess of A), whose call is gated on B. The question surfaces on A's
run (`runs approve` on A's store names it), and B's agent goes on where it stopped: its
model is not asked again and the gated call runs once, after the decision. A's approver may
also be A's own MCP client (A served with a store), asked by elicitation or in a round."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from tests.server.processes import http_server
from tests.server.test_served_approval import Person
from tests.servers.openai_stub import Answer, OpenAIStub, openai_stub

from .cli_runs import REPO, SCRIPT, cli, list_runs, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def _gateways(tmp_path: Path, log: Path, *, leaf_answers: list[object]) -> Path:
    leaf_script = script_model(tmp_path / "leaf.json", *leaf_answers)
    b = tmp_path / "b.toml"
    b.write_text(
        '[tools.logged]\npython = "tests.durable_tools:logged"\n'
        '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
        f'[agents.leaf]\nmodel = "{leaf_script}"\ntools = ["logged", "guarded"]\n'
        'require_approval = ["guarded"]\ndescription = "Does what it is told."\n'
    )
    a = tmp_path / "a.toml"
    a.write_text(
        f"[mcpServers.b]\ncommand = {json.dumps(str(SCRIPT))}\n"
        f'args = ["serve", "--stdio", "--config", {json.dumps(str(b))}]\n'
        f"cwd = {json.dumps(str(REPO))}\nenv = {{PYTHONPATH = {json.dumps(str(REPO))}}}\n"
        '[agents.lead]\ntools = ["b"]\n'
    )
    return a


@pytest.mark.parametrize("approve", [True, False])
async def test_a_gated_call_on_a_nested_gateway_is_decided_on_the_outer_run(
    tmp_path: Path, approve: bool
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = _gateways(
        tmp_path,
        log,
        leaf_answers=[
            {
                "tool_calls": [
                    tool_call("logged", "w1", log=str(log), name="A"),
                    tool_call("guarded", "w2", log=str(log), name="B"),
                ]
            },
            {"content": "leaf: A done, B " + ("done" if approve else "refused")},
        ],
    )
    lead = script_model(
        tmp_path / "lead.json",
        {"tool_calls": [{"name": "b__leaf", "id": "l1", "arguments": {"prompt": "do A and B"}}]},
        {"content": "lead: the leaf reported back"},
    )
    run = await start_run("go", "--config", str(config), "--store", store, "--model", lead)
    try:
        await run.until("waiting for approval: guarded")
        # B waits; its step's other call (A) runs meanwhile, done by now or soon (not ordered
        # with the question: checked once the run ends).
        assert not log.exists() or "B" not in log.read_text()
        [waiting] = list_runs(store)
        assert waiting["status"] == "waiting_approval"
        [asked] = waiting["waiting"]
        assert (asked["short"], asked["tool"], asked["agents"]) == (
            "l1/w2",
            "guarded",
            ["lead", "leaf"],
        )
        assert asked["input"]["name"] == "B"
        decision = ["approve"] if approve else ["deny", "--message", "not B"]
        decided = cli("runs", *decision, waiting["run_id"], "l1/w2", "--store", store)
        assert decided.returncode == 0, decided.stderr
        assert await run.finish() == (0, "lead: the leaf reported back\n")
    finally:
        await stop_run(run)
    ran = ["start A", "end A", "start B", "end B"] if approve else ["start A", "end A"]
    assert log.read_text().splitlines() == ran  # each call once; the leaf's model not re-asked
    shown = cli("runs", "show", waiting["run_id"], "--json", "--store", store)
    assert shown.returncode == 0, shown.stderr
    told = json.loads(shown.stdout)["calls"][1]["output"]
    assert ("B done" in json.dumps(told)) == approve


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_the_outer_gateways_own_mcp_client_approves_the_nested_call(
    tmp_path: Path, era: str
) -> None:
    log = tmp_path / "calls.log"
    config = _gateways(
        tmp_path,
        log,
        leaf_answers=[
            {"tool_calls": [tool_call("guarded", "w2", log=str(log), name="B")]},
            {"content": "leaf: B done"},
        ],
    )
    lead = script_model(
        tmp_path / "lead.json",
        {"tool_calls": [{"name": "b__leaf", "id": "l1", "arguments": {"prompt": "do B"}}]},
        {"content": "lead: the leaf did B"},
    )
    config.write_text(
        config.read_text().replace("[agents.lead]\n", f'[agents.lead]\nmodel = "{lead}"\n')
    )
    person = Person(approve=True)

    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with (
        http_server(config, "--store", store, env={"PYTHONPATH": str(REPO)}) as served,
        Client(served.url, mode=era, elicitation_callback=person) as client,
    ):
        result = await client.call_tool("lead", {"prompt": "go"})
    assert result.content == [types.TextContent(text="lead: the leaf did B")]
    assert len(person.asked) == 1
    assert person.asked[0].startswith("Agent 'leaf' wants to call guarded with")
    assert log.read_text().splitlines() == ["start B", "end B"]


def _stub_gateways(tmp_path: Path, leaf: OpenAIStub, lead: OpenAIStub) -> Path:
    """A's `lead` calls B's `leaf` (B over stdio) as `_gateways`, both models served over HTTP:
    the leaf's tool call ids are new on each request, as a provider's are."""
    config = _gateways(tmp_path, tmp_path / "calls.log", leaf_answers=[])
    b = tmp_path / "b.toml"
    b.write_text(b.read_text().replace(f'"scripted:{tmp_path / "leaf.json"}"', f'"{leaf.spec}"'))
    config.write_text(
        config.read_text().replace("[agents.lead]\n", f'[agents.lead]\nmodel = "{lead.spec}"\n')
    )
    return config


def _waiting(done: subprocess.CompletedProcess[str]) -> list[str]:
    assert done.returncode == 3, done.stderr
    return [w["short"] for w in json.loads(done.stdout)["waiting"]]


@pytest.mark.timeout(180)
async def test_a_nested_gateways_call_decided_while_no_process_waits_runs_on_resume(
    tmp_path: Path,
) -> None:
    # --no-wait stops A's run while B's call waits: B's run there starts over on `resume` and
    # asks the call again under a new id. The decision made meanwhile is that call's.
    log = tmp_path / "calls.log"
    guarded = {"name": "guarded", "arguments": {"log": str(log), "name": "B"}}
    beside = {"name": "logged", "arguments": {"log": str(log), "name": "A"}}
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    lead_answers: list[Answer] = [{"name": "b__leaf", "arguments": {"prompt": "do A and B"}}]
    with (
        openai_stub([[guarded, beside], [guarded, beside], "leaf: B done"]) as leaf,
        openai_stub([*lead_answers, "lead: the leaf reported back"]) as lead,
    ):
        config = _stub_gateways(tmp_path, leaf, lead)
        started = cli("run", "go", "--config", str(config), "--store", store, "--no-wait", "--json")
        [asked] = _waiting(started)
        run_id = json.loads(started.stdout)["run_id"]
        decided = cli("runs", "approve", run_id, asked, "--store", store)
        assert decided.returncode == 0, decided.stderr
        resumed = cli("resume", run_id, "--store", store, "--no-wait", "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == "lead: the leaf reported back"
        assert len(leaf.requests) == 3  # the leaf's run started over once, and ended
    assert log.read_text().count("start B") == 1  # the approved call ran once
    assert "end B" in log.read_text()


@pytest.mark.timeout(240)
async def test_a_decision_handed_to_a_nested_gateway_is_not_handed_on_again(
    tmp_path: Path,
) -> None:
    # B's call, approved, ran; then A's run stopped at B's next call. B's run starts over on
    # `resume` and asks the first call again: it ran once already, so it is asked anew.
    log = tmp_path / "calls.log"
    first = {"name": "guarded", "arguments": {"log": str(log), "name": "B"}}
    then = {"name": "guarded", "arguments": {"log": str(log), "name": "C"}}
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    with (
        openai_stub([first, first, then, first]) as leaf,
        openai_stub([{"name": "b__leaf", "arguments": {"prompt": "do B, C"}}]) as lead,
    ):
        config = _stub_gateways(tmp_path, leaf, lead)
        started = cli("run", "go", "--config", str(config), "--store", store, "--no-wait", "--json")
        [asked] = _waiting(started)
        run_id = json.loads(started.stdout)["run_id"]
        assert cli("runs", "approve", run_id, asked, "--store", store).returncode == 0
        [next_one] = _waiting(cli("resume", run_id, "--store", store, "--no-wait", "--json"))
        assert log.read_text().splitlines() == ["start B", "end B"]
        assert cli("runs", "approve", run_id, next_one, "--store", store).returncode == 0
        again = _waiting(cli("resume", run_id, "--store", store, "--no-wait", "--json"))
        assert len(leaf.requests) == 4
    assert asked not in again  # B's first call asked anew, under its new id...
    assert [call for call in again if call != next_one]  # ...waiting for a new decision
    assert log.read_text().splitlines() == ["start B", "end B"]  # not run again unasked
