"""A stored run's checkpoints write what each step added (`durable.checkpoints`): the store
grows linearly with the run's steps, inside sub-agents too, and each write stays small; a run
an earlier version stored (its whole state in every checkpoint) still resumes and shows."""

from __future__ import annotations

import json
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from dbos import DBOS

from gateway.cli import main
from gateway.durable.checkpoints import MOVED, Checkpoints
from gateway.durable.chunks import MARK
from gateway.durable.status import CHECKPOINT_STEP, STATE_EVENT
from gateway.run_state import RunState

CONFIG = """
[tools.calculator]
builtin = "calculator"
[agents.lead]
tools = ["helper"]
max_iterations = 200
[agents.helper]
description = "Does sums."
tools = ["calculator"]
max_iterations = 200
"""
STEPS = 32
BIG_STEPS = STEPS + 3
"""Past a block of steps: the state names a block of them."""


def _sums(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "tool_calls": [
                {"name": "calculator", "id": f"c{i}", "arguments": {"expression": f"{i}+1"}}
            ]
        }
        for i in range(start, start + n)
    ]


def _helper(call_id: str = "h1") -> dict[str, Any]:
    return {"tool_calls": [{"name": "helper", "id": call_id, "arguments": {"prompt": "sum"}}]}


def _run(tmp_path: Path, script: list[Any], *args: str) -> list[str]:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(script))
    return ["run", "go", "--config", str(config), "--model", f"scripted:{answers}", *args]


def _written(store: Path) -> tuple[int, int]:
    """The bytes the run's checkpoints wrote (every value its state event had, and its
    checkpoint steps), and the largest of those writes."""
    with closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        events = [
            len(v)
            for (v,) in db.execute(
                "SELECT value FROM workflow_events_history WHERE key = ?", (STATE_EVENT,)
            )
        ]
        chunks = [
            len(o)
            for (o,) in db.execute(
                "SELECT output FROM operation_outputs WHERE function_name = ?", (CHECKPOINT_STEP,)
            )
        ]
    writes = events + chunks
    assert writes
    return sum(writes), max(writes)


@pytest.mark.parametrize("inside_a_sub_agent", [False, True])
def test_the_store_grows_linearly_with_a_runs_steps_and_each_write_stays_small(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], inside_a_sub_agent: bool
) -> None:
    written: dict[int, tuple[int, int]] = {}
    for steps in (STEPS, 2 * STEPS):
        script = [*_sums(steps), {"content": "done"}]
        if inside_a_sub_agent:  # each of its steps saves the lead's state too
            script = [_helper(), *script, {"content": "the helper is done"}]
        store = tmp_path / f"{steps}.sqlite3"
        agent = "lead" if inside_a_sub_agent else "helper"
        command = _run(tmp_path, script, "--agent", agent, "--store", f"sqlite:///{store}")
        assert main(command) == 0
        assert "done" in capsys.readouterr().out
        written[steps] = _written(store)
    (once, largest_once), (twice, largest_twice) = written[STEPS], written[2 * STEPS]
    # The whole state in each checkpoint: ~3.8 times as much for twice the steps.
    assert twice < 2.4 * once
    assert max(largest_once, largest_twice) < 5_000  # a step's worth, however long the run


def _stopped(tmp_path: Path, capsys: pytest.CaptureFixture[str], script: list[Any]) -> list[str]:
    """A run of `script` (on the lead) stopped as its model runs out; the resume command."""
    state_dir = str(tmp_path / "runs")
    assert main(_run(tmp_path, script, "--agent", "lead", "--state-dir", state_dir)) == 1
    err = capsys.readouterr().err
    match = re.search(r"the run is stored: agent-gateway (resume .*)$", err, re.MULTILINE)
    assert match is not None, err
    return match.group(1).split()


def _state_event(tmp_path: Path, run_id: str) -> str:
    with closing(sqlite3.connect(tmp_path / "runs" / "agent-gateway.sqlite3")) as db:
        [(value,)] = db.execute(
            "SELECT value FROM workflow_events WHERE workflow_uuid = ? AND key = ?",
            (run_id, STATE_EVENT),
        )
    saved = json.loads(value)
    assert isinstance(saved, str)
    return saved


def _resumed(tmp_path: Path, capsys: pytest.CaptureFixture[str], resume: list[str]) -> str:
    """`resume` run on a model that finishes the helper's work, then the lead's: its answer,
    having made no tool call again."""
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps([{"content": "sums done"}, {"content": "the helper is done"}]))
    assert main([*resume, "--trace"]) == 0
    out, err = capsys.readouterr()
    assert "calculator" not in err  # every call of the helper had ended before it stopped
    return out


def test_a_run_an_earlier_version_stored_whole_resumes_and_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def whole(self: Checkpoints, state: RunState) -> None:  # as checkpoints were written
        await DBOS.set_event_async(STATE_EVENT, state.model_dump_json())

    with monkeypatch.context() as patched:
        patched.setattr(Checkpoints, "__call__", whole)
        resume = _stopped(tmp_path, capsys, [_helper(), *_sums(BIG_STEPS)])
    run_id = resume[1]
    saved = _state_event(tmp_path, run_id)
    assert saved.startswith('{"version":1,')  # a whole state
    stored = RunState.model_validate_json(saved)
    show = ["runs", "show", run_id, "--state-dir", str(tmp_path / "runs")]
    assert main([*show, "--json"]) == 0
    assert RunState.model_validate(json.loads(capsys.readouterr().out)["state"]) == stored
    assert main(show) == 0
    assert f"out tokens, {BIG_STEPS + 1} model calls" in capsys.readouterr().out

    assert _resumed(tmp_path, capsys, resume) == "the helper is done\n"
    assert _state_event(tmp_path, run_id) == MOVED  # its checkpoints are steps from then on
    assert main([*show, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["status"] == "succeeded"
    assert shown["state"]["children"] == {}  # its last checkpoint: the lead's, to answer


def test_a_stopped_run_resumes_from_its_chunked_state_exactly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resume = _stopped(tmp_path, capsys, [_helper(MARK + "h1"), *_sums(BIG_STEPS)])
    run_id = resume[1]
    assert _state_event(tmp_path, run_id) == MOVED
    show = ["runs", "show", run_id, "--state-dir", str(tmp_path / "runs")]
    assert main([*show, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    [helper] = shown["state"]["children"].values()  # the helper's state, read whole
    steps = helper["request"]["metadata"]["previous_steps"]["0"]
    assert [s["observation"] for s in steps] == [str(i + 1) for i in range(BIG_STEPS)]
    [call] = shown["calls"][1:]  # the helper's call, by its own id: no record is ours
    assert (call["name"], call["call_id"]) == ("helper", MARK + "h1")
    tools = [c["call_id"] for c in call["calls"] if c["kind"] == "tool"]
    assert tools == [f"c{i}" for i in range(BIG_STEPS)]
    assert main(show) == 0
    assert f"out tokens, {BIG_STEPS + 1} model calls" in capsys.readouterr().out
    assert _resumed(tmp_path, capsys, resume) == "the helper is done\n"


def test_a_state_that_names_a_chunk_the_store_lost_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    resume = _stopped(tmp_path, capsys, [_helper(), *_sums(3)])
    with closing(sqlite3.connect(tmp_path / "runs" / "agent-gateway.sqlite3")) as db, db:
        db.execute(  # all but the last checkpoint, which names their chunks (earlier steps)
            "DELETE FROM operation_outputs WHERE function_name = ?1 AND function_id < "
            "(SELECT max(function_id) FROM operation_outputs WHERE function_name = ?1)",
            (CHECKPOINT_STEP,),
        )
    said = f"the state of run {resume[1]} cannot be read: chunk [0-9a-f]{{32}} is missing\n"
    assert main(resume) == 2
    assert re.fullmatch(f"error: {said}", capsys.readouterr().err)
    # `runs show` shows the rest of what is stored, saying what it could not read.
    assert main(["runs", "show", resume[1], "--state-dir", str(tmp_path / "runs")]) == 0
    shown = capsys.readouterr()
    assert re.fullmatch(f"warning: {said}", shown.err)
    assert shown.out.startswith(f"run {resume[1]}  ")
