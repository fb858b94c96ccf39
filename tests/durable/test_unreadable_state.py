"""A stored run whose state does not validate (another version's, a damaged or edited record,
metadata that does not fit its items) is refused in one line by `resume` (exit 2, stdout empty
under `--json`, as bad input is), before any of its calls runs; `runs show` shows what else
is stored of it, and says what it could not read. Each was a 45-line traceback."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any, cast

import pytest

from gateway.durable.chunks import unpack
from gateway.durable.status import CHECKPOINT_STEP, STATE_EVENT
from tests.durable.cli_runs import cli, script_model, tool_call

CONFIG = (
    '[tools.calculator]\nbuiltin = "calculator"\n'
    '[agents.assistant]\ntools = ["calculator"]\nrequire_approval = ["calculator"]\n'
)

State = dict[str, Any]


@pytest.fixture(scope="module")
def waiting_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A store holding a run that waits for a person's approval of its one call
    (`--no-wait`): its file, and the run's id."""
    where = tmp_path_factory.mktemp("waiting")
    config = where / "agent-gateway.toml"
    config.write_text(CONFIG)
    store = where / "runs.sqlite"
    model = script_model(
        where / "a.json", {"tool_calls": [tool_call("calculator", "c1", expression="6*7")]}
    )
    run = ["run", "q", "--config", str(config), "--model", model, "--store", f"sqlite:///{store}"]
    started = cli(*run, "--no-wait", "--json")
    assert started.returncode == 3, started.stderr
    return store, json.loads(started.stdout)["run_id"]


def _changed(
    waiting_run: tuple[Path, str], tmp_path: Path, change: Callable[[State], object]
) -> tuple[str, str]:
    """A copy of the waiting run's store, its state changed by `change`: the store's URL."""
    original, run_id = waiting_run
    copy = tmp_path / "runs.sqlite"
    shutil.copy(original, copy)
    store = f"sqlite:///{copy}"
    _rewrite_state(store, run_id, change)
    return store, run_id


def _rewrite_state(store: str, run_id: str, change: Callable[[State], object]) -> None:
    """The run's stored state, changed by `change` (in place; or the text it returns). A
    changed state is written as its last checkpoint holding it whole; a text as the `state`
    event of an earlier version's run (with no checkpoints), where a text is read as it is."""
    with closing(sqlite3.connect(store.removeprefix("sqlite:///"))) as db, db:
        where = "FROM operation_outputs WHERE workflow_uuid = ?1 AND function_name = ?2"
        checkpoints = [
            json.loads(output)
            for (output,) in db.execute(
                f"SELECT output {where} ORDER BY function_id", (run_id, CHECKPOINT_STEP)
            )
        ]
        assert checkpoints
        chunks = {k: v for checkpoint in checkpoints for k, v in checkpoint["chunks"].items()}
        state = cast(State, unpack(checkpoints[-1]["state"], chunks))
        text = change(state)
        if isinstance(text, str):
            db.execute(f"DELETE {where}", (run_id, CHECKPOINT_STEP))
            db.execute(
                "UPDATE workflow_events SET value = ? WHERE workflow_uuid = ? AND key = ?",
                (json.dumps(text), run_id, STATE_EVENT),
            )
            return
        db.execute(
            f"UPDATE operation_outputs SET output = ?3 WHERE workflow_uuid = ?1 AND "
            f"function_name = ?2 AND function_id = (SELECT max(function_id) {where})",
            (run_id, CHECKPOINT_STEP, json.dumps({"state": state, "chunks": {}})),
        )


def _metadata(state: State) -> State:
    return state["request"]["metadata"]


def _deep(levels: int) -> Any:
    return json.loads("[" * levels + "]" * levels)


MUTATIONS: dict[str, tuple[Callable[[State], object], str]] = {
    "a newer version's metadata": (
        lambda s: _metadata(s).update(version=99),
        "request.metadata: the agent metadata is version 99; this agent resumes versions 1, "
        "2, 3, 4, 5, 6 and 7 only: finish or restart the run with the version that began it",
    ),
    "a newer version's state": (lambda s: s.update(version=2), "version: Input should be 1"),
    "a damaged record": (
        lambda s: json.dumps(s)[:100],
        "Invalid JSON: EOF while parsing a string at line 1 column 100",
    ),
    "no items": (
        lambda s: s.update(items=[]),
        "the step was given no items; resume a run with the items it started with",
    ),
    "an item finished and waiting": (
        lambda s: _metadata(s).update(finished_items={"0": {"output": "x"}}),
        "the request's metadata holds item 0 as finished and as waiting for the results of "
        "its calls: it cannot be both",
    ),
    "an action of an item the run has not": (
        lambda s: s["request"]["actions"][0].update(item_index=5),
        "the request has an action for item 5 (call 'c1'), but the run has 1 item: resume a "
        "run with the items it started with",
    ),
    "nested past what the reader takes": (
        lambda s: s["request"]["actions"][0].update(input={"expression": _deep(300)}),
        "Invalid JSON: recursion limit exceeded at line 1 column",
    ),
}


@pytest.mark.parametrize("mutation", list(MUTATIONS))
def test_a_state_that_does_not_validate_is_refused_in_one_line_before_anything_runs(
    waiting_run: tuple[Path, str], tmp_path: Path, mutation: str
) -> None:
    change, problem = MUTATIONS[mutation]
    store, run_id = _changed(waiting_run, tmp_path, change)
    # Before, the traceback; or (an action of item 5) a wait for an approval nothing asked.
    resumed = cli("resume", run_id, "--store", store, "--json")
    assert (resumed.returncode, resumed.stdout) == (2, ""), resumed.stderr
    assert resumed.stderr.startswith(f"error: stored run {run_id!r} cannot be resumed: {problem}")
    assert len(resumed.stderr.splitlines()) == 1, resumed.stderr


def test_runs_show_shows_what_else_is_stored_and_says_what_it_could_not_read(
    waiting_run: tuple[Path, str], tmp_path: Path
) -> None:
    change, problem = MUTATIONS["a newer version's metadata"]
    store, run_id = _changed(waiting_run, tmp_path, change)
    said = f"stored run {run_id!r} cannot be resumed: {problem}"
    shown = cli("runs", "show", run_id, "--store", store)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"run {run_id}  waiting_approval  agent assistant")
    assert "calls calculator" in shown.stdout  # its recorded model call
    assert shown.stderr == f"warning: {said}\n"
    as_json = cli("runs", "show", run_id, "--store", store, "--json")
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert (data["status"], data["state"], data["unreadable"]) == ("waiting_approval", None, [said])
