"""`runs list` as text: each run's id, status, when it last changed (UTC, as `sessions list`
says it), its agent, the calls it waits on, and why it stopped."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .cli_runs import cli, list_runs, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CONFIG = (
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
    '[agents.assistant]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
)


async def test_a_waiting_run_is_listed_with_its_time_and_the_calls_it_waits_on(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = str(tmp_path / "calls.log")
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    both = [
        tool_call("guarded", "g1", log=log, name="G"),
        tool_call("guarded", "g2", log=log, name="H"),
    ]
    model = script_model(tmp_path / "s.json", {"tool_calls": both}, {"content": "done"})
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded", count=2)
        listed = cli("runs", "list", "--store", store)
        [waiting] = list_runs(store)
    finally:
        await stop_run(run)
    assert listed.returncode == 0, listed.stderr
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    line = rf"{waiting['run_id']}  waiting_approval {when}  assistant  waiting on g1, g2\n"
    assert re.fullmatch(line, listed.stdout), listed.stdout
    assert isinstance(waiting["updated_ms"], int)
