"""`runs cancel` from another process ends the run where it runs: its calls in flight stop
(a tool, a wait for approval), the process says the run was cancelled and exits 1, with one
JSON object on stdout under `--json`; the store lists it as cancelled, and it cannot resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .cli_runs import cli, list_runs, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CONFIG = (
    '[tools.wait]\npython = "tests.sample_tools:wait_until_cancelled"\n'
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.plain]\npython = "tests.durable_tools:logged"\n'
    '[agents.assistant]\ntools = ["wait", "logged", "plain"]\nrequire_approval = ["logged"]\n'
)


async def _cancelled_once(
    tmp_path: Path,
    store: str,
    *calls: dict[str, Any],
    once: tuple[str, ...],
    json_out: bool = False,
) -> tuple[str, int, str]:
    """A run of `calls` (one step) cancelled by `runs cancel` once its stderr says `once`:
    its id, its exit code and stdout; its stderr has no traceback and says it was cancelled."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    model = script_model(tmp_path / "s.json", {"tool_calls": list(calls)}, {"content": "never"})
    args = ["go", "--config", str(config), "--store", store, "--model", model]
    run = await start_run(*args, *(["--json"] if json_out else []))
    try:
        await run.until(*once)
        [going] = list_runs(store)
        cancelled = cli("runs", "cancel", going["run_id"], "--store", store, "--json")
        assert cancelled.returncode == 0, cancelled.stderr
        # One JSON object, as `runs list --json` gives the run (it printed none).
        shown = json.loads(cancelled.stdout)
        assert (shown["run_id"], shown["status"]) == (going["run_id"], "cancelled")
        assert shown.keys() == going.keys()
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert f"error: run {going['run_id']} was cancelled" in run.err
    assert "Traceback" not in run.err
    return going["run_id"], code, out


async def test_a_run_cancelled_mid_call_stops_its_call_and_ends(tmp_path: Path, store: str) -> None:
    marker = tmp_path / "marker"
    call = tool_call("wait", "w1", marker=str(marker))
    ended = tool_call("plain", "p1", log=str(tmp_path / "calls.log"), name="P")
    started = ("wait_until_cancelled: started", "recorded tool 0 p1")
    run_id, code, out = await _cancelled_once(
        tmp_path, store, call, ended, once=started, json_out=True
    )
    assert marker.read_text() == "cancelled"  # the call in flight stopped
    assert code == 1
    printed = json.loads(out)
    assert printed["run_id"] == run_id
    assert printed["error"].startswith(f"run {run_id} was cancelled")
    # What it spent till then is known, as `runs show` says it (it printed null).
    assert (printed["status"], printed["usage"]["requests"], printed["iterations"]) == (
        "cancelled",
        1,
        1,
    )
    # The call of the step that ended is said, as its record holds it (was []).
    assert [(s["call_id"], s["observation"]) for s in printed["steps"]] == [("p1", "P done")]
    assert list_runs(store)[0]["status"] == "cancelled"
    again = cli("resume", run_id, "--store", store)
    assert again.returncode == 2
    assert "has ended (cancelled)" in again.stderr


async def test_a_run_cancelled_while_it_waits_for_approval_ends(tmp_path: Path, store: str) -> None:
    log = tmp_path / "calls.log"
    call = tool_call("logged", "g1", log=str(log), name="G")
    _, code, out = await _cancelled_once(
        tmp_path, store, call, once=("waiting for approval: logged",), json_out=True
    )
    assert code == 1
    printed = json.loads(out)
    assert (printed["status"], printed["usage"]["requests"]) == ("cancelled", 1)
    assert not log.exists()
    [ended] = list_runs(store)
    assert (ended["status"], ended["waiting"]) == ("cancelled", [])
