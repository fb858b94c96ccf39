"""A SQLite run store deleted while a run waits for approval: the run stops and says its store
went, with what it recorded; it promises no resume, which could find nothing (was: it waited
for ever for a decision no process could send it, and on Ctrl-C said `the run is stored:
agent-gateway resume ...`, which then failed)."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import anyio
import pytest

from .cli_runs import Run, script_model, start_run, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CONFIG = (
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
    '[agents.assistant]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
)


async def _waiting(tmp_path: Path) -> tuple[Run, Path]:
    """A run waiting for approval of its call, and its store's file."""
    file = tmp_path / "runs.sqlite3"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("guarded", "g1", log=str(tmp_path / "calls.log"), name="G")]},
        {"content": "G is done"},
    )
    run = await start_run(
        "go", "--config", str(config), "--store", f"sqlite:///{file}", "--model", model, "--json"
    )
    await run.until("waiting for approval: guarded")
    return run, file


def _delete(file: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{file}{suffix}").unlink(missing_ok=True)


async def test_a_run_whose_store_is_deleted_as_it_waits_stops_and_says_so(
    tmp_path: Path,
) -> None:
    run, file = await _waiting(tmp_path)
    try:
        _delete(file)
        with anyio.fail_after(20):  # a look every 2 s
            code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 1, run.err
    said = (
        f"the run store sqlite:///{file} was deleted (or replaced) while the run executed: what "
        "it recorded went with it, so it cannot be resumed; start it again"
    )
    assert f"error: {said}\n" in run.err
    assert "agent-gateway resume" not in run.err
    printed = json.loads(out)
    assert (printed["run_id"], printed["status"], printed["error"]) == (None, "failed", said)
    assert printed["usage"]["requests"] == 1  # what it did till then


async def test_ctrl_c_of_a_run_whose_store_is_deleted_promises_no_resume(tmp_path: Path) -> None:
    run, file = await _waiting(tmp_path)
    try:
        _delete(file)
        run.process.send_signal(signal.SIGINT)  # before the next look at the file
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130, run.err
    assert f"is lost: the run store sqlite:///{file} was deleted" in run.err
    assert "is stored" not in run.err
    printed = json.loads(out)
    assert (printed["run_id"], printed["status"]) == (None, "failed")
    assert printed["error"].startswith("interrupted: the run is lost: the run store ")
