"""A run store that cannot be written now (its disk full, locked by another process, read-only)
is said in one line, exit 1 (`--json`: one object), never a traceback; a run stopped by it
resumes once there is room. The disk is made full by `full_store/sitecustomize.py`."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError

from agent import AgentItem, ScriptedModel
from gateway import AgentSpec, Gateway, RunState
from gateway.cli.exits import FAILED, exit_code
from gateway.durable import open_runs
from gateway.durable.store_failures import store_failure
from gateway.errors import StoreUnavailable

from .cli_runs import REPO, SCRIPT, cli, cli_env, list_runs, script_model

FULL = Path(__file__).parent / "full_store"
ROOM = "database or disk is full: free some space on its disk"


def _full(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` with no room left in the SQLite file `store`."""
    env = {**cli_env(), "FULL_STORE": str(store), "PYTHONPATH": f"{FULL}:{REPO}"}
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=60
    )


def test_a_run_the_full_store_cannot_take_is_one_line_and_not_stored(tmp_path: Path) -> None:
    file = tmp_path / "runs.sqlite3"
    store = f"sqlite:///{file}"
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    assert cli("run", "first", "--store", store, "--model", model).returncode == 0
    big = "x" * 30_000  # its state needs new pages: none are left
    for json_output in (False, True):
        done = _full(
            file, "run", big, "--store", store, "--model", model, *["--json"][:json_output]
        )
        assert done.returncode == 1, done.stderr  # was: a 60-line traceback (exit 1)
        said = f"error: cannot write to the run store {store}: {ROOM}\n"
        assert done.stderr == said
        if json_output:  # was: nothing
            printed = json.loads(done.stdout)
            assert (printed["run_id"], printed["status"]) == (None, "failed")  # not stored
            assert printed["error"] == said.removeprefix("error: ").strip()
    assert [run["status"] for run in list_runs(store)] == ["succeeded"]


def test_a_run_stopped_by_a_full_store_says_so_and_resumes_once_there_is_room(
    tmp_path: Path,
) -> None:
    file = tmp_path / "runs.sqlite3"
    store = f"sqlite:///{file}"
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    assert cli("run", "first", "--store", store, "--model", model).returncode == 0
    long = script_model(tmp_path / "long.json", {"content": "y" * 30_000})  # no room to record
    done = _full(file, "run", "go", "--store", store, "--model", long, "--json")
    assert done.returncode == 1, done.stderr
    [said, hint] = done.stderr.splitlines()
    assert said == f"error: cannot write to the run store {store}: {ROOM}"
    printed = json.loads(done.stdout)
    assert printed["status"] == "stopped"
    assert hint == f"the run is stored: agent-gateway resume {printed['run_id']} --store {store}"
    runs = {run["run_id"]: run for run in list_runs(store)}
    assert runs[printed["run_id"]]["status"] == "stopped"  # not left `running`
    assert ROOM in runs[printed["run_id"]]["error"]
    # Room again: it resumes.
    answer = script_model(tmp_path / "b.json", {"content": "done"})
    resumed = cli("resume", printed["run_id"], "--store", store, "--model", answer)
    assert (resumed.returncode, resumed.stdout) == (0, "done\n"), resumed.stderr


@pytest.mark.parametrize(
    ("words", "advice"),
    [
        ("database is locked", "another process holds its write lock"),
        ("database or disk is full", "free some space on its disk"),
        ("attempt to write a readonly database", "it is read-only here: make it writable"),
    ],
)
def test_a_sqlite_store_that_cannot_be_written_now_fails_the_run(words: str, advice: str) -> None:
    """Not bad input (exit 2, as a file that is not a database): the store is fine, but cannot
    be written now."""
    url = "sqlite:////data/runs.sqlite3"
    failure = store_failure(
        url, OperationalError("INSERT ...", {}, sqlite3.OperationalError(words))
    )
    assert isinstance(failure, StoreUnavailable)  # was: StoreError, exit 2
    assert exit_code(failure) == FAILED
    assert str(failure).startswith(f"cannot open the run store {url}: {words}: {advice}")


@pytest.mark.anyio
async def test_a_served_run_the_full_store_stops_is_stopped_not_running(tmp_path: Path) -> None:
    """In a process that lives on (`serve`): a run the store cannot take in is not begun (one
    line, nothing left executing); one whose step cannot be recorded stops, listed `stopped`
    with why, resumable (was: left `running`, the client told a raw OperationalError)."""
    file = tmp_path / "runs.sqlite3"
    store = f"sqlite:///{file}"
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    assert cli("run", "first", "--store", store, "--model", model).returncode == 0
    with _no_room(file):
        async with open_runs(store) as runs:
            runs.use(Gateway([], [AgentSpec("assistant", ScriptedModel(["y" * 30_000]))]))
            big = RunState(run_id="big", agent="assistant", items=[AgentItem(prompt="x" * 30_000)])
            with pytest.raises(StoreUnavailable, match=f"cannot write to the run store .*: {ROOM}"):
                await runs.begin(big)
            assert not runs.here("big")
            small = RunState(run_id="small", agent="assistant", items=[AgentItem(prompt="go")])
            await runs.begin(small)  # its model's answer cannot be recorded
            with pytest.raises(StoreUnavailable, match=ROOM):
                await runs.follow("small")
            info = await runs.get("small")
    assert info.status == "stopped"
    assert info.error is not None
    assert ROOM in info.error


@contextmanager
def _no_room(file: Path) -> Generator[None]:
    """In this process, as `full_store/sitecustomize.py` does in a subprocess."""
    with sqlite3.connect(file) as connection:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]

    def full(connection: Any, record: Any) -> None:
        if isinstance(connection, sqlite3.Connection):
            connection.execute(f"PRAGMA max_page_count = {pages}")

    event.listen(Engine, "connect", full)
    try:
        yield
    finally:
        event.remove(Engine, "connect", full)
