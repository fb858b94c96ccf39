"""`runs cancel` from another process ends the run where it runs: its calls in flight stop
(a tool, a wait for approval), the process says the run was cancelled and exits 1, with one
JSON object on stdout under `--json`; the store lists it as cancelled, and it cannot resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .cli_runs import cli, list_runs, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CONFIG = (
    '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[agents.assistant]\ntools = ["wait", "logged"]\nrequire_approval = ["logged"]\n'
)


async def test_a_run_cancelled_mid_call_stops_its_call_and_ends(tmp_path: Path, store: str) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    marker = tmp_path / "marker"
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("wait", "w1", marker=str(marker))]},
        {"content": "never"},
    )
    args = ("go", "--config", str(config), "--store", store, "--model", model, "--json")
    run = await start_run(*args)
    try:
        await run.until("wait_until_cancelled: started")
        [running] = list_runs(store)
        cancelled = cli("runs", "cancel", running["run_id"], "--store", store)
        assert cancelled.returncode == 0, cancelled.stderr
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert marker.read_text() == "cancelled"  # the call in flight stopped
    assert code == 1
    assert f"error: run {running['run_id']} was cancelled" in run.err
    assert "Traceback" not in run.err
    printed = json.loads(out)
    assert printed["run_id"] == running["run_id"]
    assert printed["error"].startswith(f"run {running['run_id']} was cancelled")
    assert list_runs(store)[0]["status"] == "cancelled"
    again = cli("resume", running["run_id"], "--store", store)
    assert again.returncode == 2
    assert "has ended (cancelled)" in again.stderr


async def test_a_run_cancelled_while_it_waits_for_approval_ends(tmp_path: Path, store: str) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    log = tmp_path / "calls.log"
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("logged", "g1", log=str(log), name="G")]},
        {"content": "never"},
    )
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: logged")
        [waiting] = list_runs(store)
        cancelled = cli("runs", "cancel", waiting["run_id"], "--store", store)
        assert cancelled.returncode == 0, cancelled.stderr
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert (code, out) == (1, "")
    assert f"error: run {waiting['run_id']} was cancelled" in run.err
    assert "Traceback" not in run.err
    assert not log.exists()
    [ended] = list_runs(store)
    assert (ended["status"], ended["waiting"]) == ("cancelled", [])
