"""What `runs list`, `runs show` and `runs approve` say of the calls a run left unfinished, at
the top and in a sub-agent: a call waiting for a person is shown so (not as one under way);
once decided, nobody is waited on and the run needs `resume`; a `--no-wait` run was left
waiting, not interrupted; a cancelled run shows its sub-agents and the calls it cut off
(running or waiting for a person) as a stopped run does, marked cancelled."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gateway.cli import main

from .cli_runs import cli, start_run, stop_run, tool_call

NESTINGS = ["flat", "nested"]


def _config(tmp_path: Path, nesting: str, helper: list[Any], tools: str) -> tuple[Path, str]:
    """A config whose agent `helper` (scripted `helper`) uses `tools`, run directly (flat) or
    as the tool call `h1` of `lead` (nested); the agent to run."""
    (tmp_path / "helper.json").write_text(json.dumps(helper))
    ask = {"tool_calls": [tool_call("helper", "h1", prompt="do it")]}
    (tmp_path / "lead.json").write_text(json.dumps([ask]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.guarded]\npython = "tests.sample_tools:shout"\n'
        '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
        f'[agents.lead]\nmodel = "scripted:{tmp_path / "lead.json"}"\ntools = ["helper"]\n'
        f'[agents.helper]\nmodel = "scripted:{tmp_path / "helper.json"}"\n'
        f'description = "Helps."\ntools = {tools}\nrequire_approval = ["guarded"]\n'
    )
    return config, "helper" if nesting == "flat" else "lead"


def _out(capsys: pytest.CaptureFixture[str], *args: str, code: int = 0) -> str:
    assert main(list(args)) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return out


def _calls(shown: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every call of a `runs show --json` tree, by its call id."""
    found: dict[str, dict[str, Any]] = {}
    for call in shown:
        if call["call_id"] is not None:
            found[call["call_id"]] = call
        found.update(_calls(call.get("calls", [])))
    return found


@pytest.mark.parametrize("nesting", NESTINGS)
def test_a_no_wait_run_waits_on_a_person_until_decided_then_needs_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nesting: str
) -> None:
    guarded = {"tool_calls": [tool_call("guarded", "c1", text="hi")]}
    config, agent = _config(tmp_path, nesting, [guarded], '["guarded"]')
    store = ["--state-dir", str(tmp_path / "state")]
    short = "c1" if nesting == "flat" else "h1/c1"
    run = ["run", "go", "--config", str(config), "--agent", agent, "--no-wait", "--json", *store]
    run_id = json.loads(_out(capsys, *run, code=3))["run_id"]

    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    line = rf"{run_id}  waiting_approval {when}  {agent}  waiting on {short}  left waiting by --no-wait\n"
    assert re.fullmatch(line, listed := _out(capsys, "runs", "list", *store)), listed
    shown = _out(capsys, "runs", "show", run_id, *store)
    assert "tool guarded  c1  (waiting for approval)" in shown
    assert "stopped: left waiting by --no-wait" in shown
    if nesting == "nested":
        assert "tool helper  h1  (in flight)" in shown  # under way: its call waits
    calls = _calls(json.loads(_out(capsys, "runs", "show", run_id, "--json", *store))["calls"])
    assert calls["c1"]["in_flight"] is calls["c1"]["waiting_approval"] is True

    approved = json.loads(_out(capsys, "runs", "approve", run_id, short, "--json", *store))
    decided = f"decided {short}: resume to continue"
    assert (approved["status"], approved["waiting"], approved["error"]) == ("stopped", [], decided)
    assert [d["short"] for d in approved["decided"]] == [short]
    line = rf"{run_id}  {'stopped':<16} {when}  {agent}  {decided}\n"
    assert re.fullmatch(line, listed := _out(capsys, "runs", "list", *store)), listed
    shown = _out(capsys, "runs", "show", run_id, *store)
    assert "tool guarded  c1  (decided, not run yet)  approved" in shown
    calls = _calls(json.loads(_out(capsys, "runs", "show", run_id, "--json", *store))["calls"])
    assert "waiting_approval" not in calls["c1"]
    assert calls["c1"]["approval"]["approved"] is True

    # The first decision stands, named, also once nobody waits on the call.
    assert main(["runs", "deny", run_id, *store]) == 2
    assert f"call {short} of run {run_id} is already decided (approved, by " in (
        capsys.readouterr().err
    )
    (tmp_path / "helper.json").write_text(
        json.dumps([{"content": "It said HI."}])
    )  # the new process's
    (tmp_path / "lead.json").write_text(json.dumps([{"content": "The helper said HI."}]))
    said = _out(capsys, "resume", run_id, "--no-wait", *store)
    assert said == ("It said HI.\n" if nesting == "flat" else "The helper said HI.\n")


@pytest.mark.anyio
@pytest.mark.integration
@pytest.mark.parametrize("nesting", NESTINGS)
async def test_a_cancelled_run_shows_its_sub_agents_and_the_calls_it_cut_off(
    tmp_path: Path, nesting: str
) -> None:
    marker = tmp_path / "marker"
    both = [tool_call("wait", "w1", marker=str(marker)), tool_call("guarded", "g1", text="hi")]
    config, agent = _config(tmp_path, nesting, [{"tool_calls": both}], '["wait", "guarded"]')
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run = await start_run("go", "--config", str(config), "--agent", agent, "--store", store)
    try:
        await run.until("wait_until_cancelled: started", "waiting for approval: guarded")
        listed = json.loads(cli("runs", "list", "--json", "--store", store).stdout)
        run_id = listed[0]["run_id"]
        cancelled = cli("runs", "cancel", run_id, "--store", store)
        assert cancelled.returncode == 0, cancelled.stderr
        assert (await run.finish())[0] == 1
    finally:
        await stop_run(run)
    assert marker.read_text() == "cancelled"

    shown = cli("runs", "show", run_id, "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert "tool wait  w1  (cancelled)" in shown.stdout
    assert "tool guarded  g1  (cancelled while waiting for approval)" in shown.stdout
    assert "(unknown)" not in shown.stdout
    data = cli("runs", "show", run_id, "--json", "--store", store)
    calls = _calls(json.loads(data.stdout)["calls"])
    assert (calls["w1"]["input"], calls["w1"]["cancelled"]) == ({"marker": str(marker)}, True)
    assert (calls["g1"]["cancelled"], calls["g1"]["waiting_approval"]) == (True, True)
    if nesting == "nested":
        assert "tool helper  h1  (cancelled)" in shown.stdout
        helper = calls["h1"]
        assert (helper["name"], helper["input"]) == ("helper", {"prompt": "do it"})
        assert (helper["in_flight"], helper["cancelled"]) == (True, True)
        assert helper["started_ms"] == helper["calls"][0]["started_ms"]  # its first call's
