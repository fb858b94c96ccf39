"""Approval across a nested gateway over MCP: gateway A's stored run calls gateway B's agent
(B a `serve --stdio` subprocess of A), whose call is gated on B. The question surfaces on A's
run (`runs approve` on A's store names it), and B's agent goes on where it stopped: its
model is not asked again and the gated call runs once, after the decision. A's approver may
also be A's own MCP client (A served with a store), asked by elicitation or in a round."""

from __future__ import annotations

import json
from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client

from tests.server.processes import http_server
from tests.server.test_served_approval import Person

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
