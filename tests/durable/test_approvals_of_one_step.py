"""A step whose model asks for several gated calls at once, in a stored (SQLite) run: every one
is listed as waiting before the run stops at a wait (`--no-wait`), each is decided on its own,
and a resumed run takes every decision sent meanwhile before it lists or announces any call
as waiting, so it goes on to the calls still undecided (it never stops again at a decided
one)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from gateway.cli import main

from .cli_runs import REPO, SCRIPT, Run, cli, cli_env, stop_run, tool_call

EXPRESSIONS = {"c1": "1+1", "c2": "2+2", "c3": "3+3"}


def _config(tmp_path: Path, calls: int) -> tuple[list[str], list[str]]:
    """An agent that asks for `calls` calculator calls in one step, each needing approval:
    the `run` arguments, and the store's."""
    ask = [tool_call("calculator", c, expression=EXPRESSIONS[c]) for c in list(EXPRESSIONS)[:calls]]
    _script(tmp_path, {"tool_calls": ask})
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "scripted:{tmp_path / "model.json"}"\n'
        'tools = ["calculator"]\nrequire_approval = ["calculator"]\n'
    )
    store = ["--state-dir", str(tmp_path / "state")]
    return ["--config", str(config), *store], store


def _script(tmp_path: Path, *answers: Any) -> None:
    """The model's answers in the next process (a resumed run asks it only what is new)."""
    (tmp_path / "model.json").write_text(json.dumps(list(answers)))


def _json(capsys: pytest.CaptureFixture[str], *args: str, code: int) -> tuple[Any, str]:
    assert main(list(args)) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return json.loads(out), err


def _waiting(capsys: pytest.CaptureFixture[str], run_id: str, store: list[str]) -> list[str]:
    listed, _ = _json(capsys, "runs", "list", "--json", *store, code=0)
    (run,) = [r for r in listed if r["run_id"] == run_id]
    return sorted(w["short"] for w in run["waiting"])


def _calls(capsys: pytest.CaptureFixture[str], run_id: str, store: list[str]) -> dict[str, Any]:
    shown, _ = _json(capsys, "runs", "show", run_id, "--json", *store, code=0)
    return {c["call_id"]: c for c in shown["calls"] if c["call_id"] is not None}


DECISIONS = {
    2: {"c2": ["approve"]},
    3: {"c2": ["approve"], "c3": ["deny", "--message", "not that one"]},
}


@pytest.mark.parametrize("calls", [2, 3])
def test_every_gated_call_of_a_step_waits_and_a_no_wait_resume_goes_on_to_the_undecided(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], calls: int
) -> None:
    run, store = _config(tmp_path, calls)
    shorts = list(EXPRESSIONS)[:calls]
    stopped, err = _json(capsys, "run", "go", *run, "--no-wait", "--json", code=3)
    run_id = stopped["run_id"]
    assert (stopped["status"], sorted(w["short"] for w in stopped["waiting"])) == (
        "waiting_approval",
        shorts,
    )
    for short in shorts:  # each named, to decide on its own
        assert f"agent-gateway runs approve {run_id} {short} " in err
    assert _waiting(capsys, run_id, store) == shorts
    for short, call in _calls(capsys, run_id, store).items():  # none "in flight" unasked
        assert call["waiting_approval"] is True, short

    for short, decision in DECISIONS[calls].items():
        assert main(["runs", *decision[:1], run_id, short, *decision[1:], *store]) == 0
    capsys.readouterr()
    _script(tmp_path, {"content": "never asked: c1 waits"})
    again, err = _json(capsys, "resume", run_id, "--no-wait", "--json", *store, code=3)
    assert [w["short"] for w in again["waiting"]] == ["c1"]
    assert err.count("waiting for approval:") == 1, err  # not the decided calls again
    assert _waiting(capsys, run_id, store) == ["c1"]

    assert main(["runs", "approve", run_id, "c1", *store]) == 0
    capsys.readouterr()
    _script(tmp_path, {"content": "All done."})
    done, err = _json(capsys, "resume", run_id, "--no-wait", "--json", *store, code=0)
    assert done["status"] == "succeeded"
    assert "waiting for approval" not in err
    ran = _calls(capsys, run_id, store)
    assert (ran["c1"]["output"], ran["c2"]["output"]) == ({"response": "2"}, {"response": "4"})
    if calls == 3:
        assert ran["c3"]["approval"]["approved"] is False
        assert "The user said: not that one" in ran["c3"]["output"]


@pytest.mark.anyio
async def test_a_waiting_resume_asks_only_for_the_undecided_call(tmp_path: Path) -> None:
    run, store = _config(tmp_path, 2)
    started = cli("run", "go", *run, "--no-wait", "--json")
    assert started.returncode == 3, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    assert cli("runs", "approve", run_id, "c2", *store).returncode == 0
    _script(tmp_path, {"content": "All done."})

    resumed = Run(
        await anyio.open_process(
            [str(SCRIPT), "resume", run_id, *store],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=cli_env(),
        )
    )
    try:
        await resumed.until("waiting for approval:")
        assert 'calculator {"expression": "1+1"}' in resumed.err
        assert "2+2" not in resumed.err  # c2 was decided before the run went on
        approved = cli("runs", "approve", run_id, "c1", *store)
        assert approved.returncode == 0, approved.stderr
        code, out = await resumed.finish()
    finally:
        await stop_run(resumed)
    assert (code, out) == (0, "All done.\n"), resumed.err
    assert resumed.err.count("waiting for approval:") == 1, resumed.err
