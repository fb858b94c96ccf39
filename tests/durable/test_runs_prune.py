"""Deleting old runs: a batch at a time, each its own transaction, whatever the backlog (was:
one statement naming every run, which PostgreSQL refuses past 65,535, and a full disk could not
take); a failure in one line; in the background of `run` and `serve`, never holding them up;
and `runs prune` gives a SQLite file's room back."""

from __future__ import annotations

import json
import math
import shlex
import shutil
import sqlite3
import subprocess
import uuid
from collections.abc import Generator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from gateway.durable import open_runs
from gateway.durable.changes import BATCH
from gateway.durable.retention import pruning

from .cli_runs import REPO, SCRIPT, cli, cli_env, list_runs, script_model
from .many_runs import cloned

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

DAY_MS = 86_400_000


def _ran(store: str, tmp_path: Path, answer: str = "hi", *args: str) -> str:
    """A run that succeeds (through the command line), its id."""
    model = script_model(tmp_path / f"{uuid.uuid4().hex}.json", {"content": answer})
    done = cli("run", "go", "--store", store, "--model", model, "--json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["run_id"]


@contextmanager
def _statements() -> Generator[list[tuple[str, int]]]:
    """Each statement run through SQLAlchemy in the block (DBOS's), with how many
    parameters it had."""
    seen: list[tuple[str, int]] = []

    def note(*args: Any) -> None:
        statement, parameters = str(args[2]), args[3]
        seen.append((statement, len(parameters) if parameters else 0))

    event.listen(Engine, "before_cursor_execute", note)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", note)


@pytest.mark.timeout(120)
async def test_more_runs_than_postgresql_takes_parameters_are_all_deleted(
    tmp_path: Path, postgres_url: str
) -> None:
    """66,000 runs that finished 40 days ago (bare rows, written at once): all deleted, 500 a
    statement, and nothing else. Was: one `IN (...)` naming every run, refused by PostgreSQL
    ("number of parameters must be between 0 and 65535"): nothing deleted, ever."""
    store = f"{postgres_url.rsplit('/', 1)[0]}/runs_{uuid.uuid4().hex[:12]}"
    recent = _ran(store, tmp_path)
    old = 66_000
    with psycopg.connect(store) as db:
        db.execute(
            "INSERT INTO dbos.workflow_status (workflow_uuid, status, name, application_name, "
            "application_version, created_at, updated_at, completed_at) "
            "SELECT 'old-' || g, CASE WHEN g = 1 THEN 'PENDING' ELSE 'SUCCESS' END, name, "
            "application_name, application_version, created_at - %(ago)s + g, "
            "updated_at - %(ago)s, CASE WHEN g > 1 THEN completed_at - %(ago)s END "
            "FROM dbos.workflow_status CROSS JOIN generate_series(1, %(n)s) AS g "
            "WHERE workflow_uuid = %(recent)s",
            {"ago": 40 * DAY_MS, "n": old + 1, "recent": recent},
        )
        db.execute(
            "INSERT INTO dbos.workflow_input (workflow_uuid, inputs) "
            "SELECT 'old-' || g, '{}' FROM generate_series(1, %s) AS g",
            (old + 1,),
        )
    async with open_runs(store, launch=False) as runs:
        with _statements() as seen:
            assert await runs.forget_finished(30) == old
    deletes = [n for statement, n in seen if statement.startswith("DELETE")]
    assert max(deletes) == BATCH
    assert len(deletes) == 4 * math.ceil(old / BATCH)  # input, output, steps, status
    with psycopg.connect(store) as db:
        kept = db.execute("SELECT workflow_uuid FROM dbos.workflow_status").fetchall()
        inputs = db.execute("SELECT count(*) FROM dbos.workflow_input").fetchone()
    assert sorted(kept) == sorted([("old-1",), (recent,)])  # not ended, and recent
    assert inputs == (2,)


def _unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    tried = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "true"],
        capture_output=True,
        timeout=10,
    )
    return tried.returncode == 0


def _on_a_full_disk(
    store: Path, room: int, *args: str, size: int = 60_000_000
) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS --store ...` on a copy of `store` in a file system of its own (a
    tmpfs of `size` bytes, in a user and mount namespace: no root needed) with `room` bytes
    left."""
    if not _unshare_works():
        pytest.skip("no user namespaces here (unshare --user --map-root-user --mount)")
    disk = store.parent / "disk"
    disk.mkdir()
    copy = disk / store.name
    script = (
        f"mount -t tmpfs -o size={size} tmpfs {disk} && cp {store} {copy} && "
        f"(cat /dev/zero > {disk}/filler 2>/dev/null; truncate -s -{room} {disk}/filler) && "
        f"{SCRIPT} {shlex.join(args)} --store sqlite:///{copy}; echo exit $?"
    )
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
        timeout=60,
    )
    assert done.stdout.strip().splitlines()[-1].startswith("exit "), done.stderr
    return done


def _exit(done: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    """The command's exit code and stdout (`_on_a_full_disk` adds a line saying the code)."""
    *out, said = done.stdout.splitlines(keepends=True)
    return int(said.split()[1]), "".join(out)


def _store_of(tmp_path: Path, runs: int) -> tuple[Path, str]:
    """A SQLite store of `runs` + 1 runs that succeeded (copies of a real one)."""
    file = tmp_path / "runs.sqlite3"
    store = f"sqlite:///{file}"
    model_answer = "x" * 4000  # about 10 KB a run, as runs with some text keep
    ran = _ran(store, tmp_path, model_answer)
    cloned(store, ran, runs, prefix="c-")
    return file, store


def test_runs_prune_on_a_full_disk_says_so_in_one_line(tmp_path: Path) -> None:
    """Nothing can be deleted on a disk with no room for a batch (a deletion is written to
    SQLite's log first): `error: cannot write to the run store ...: free some space`, exit 1,
    as `run` says it (was: a 31 KB traceback with the SQL and every run id)."""
    file, _ = _store_of(tmp_path, 600)
    for json_output in ([], ["--json"]):
        shutil.rmtree(tmp_path / "disk", ignore_errors=True)
        done = _on_a_full_disk(file, 256_000, "runs", "prune", "--older-than", "1e-9", *json_output)
        assert _exit(done) == (1, ""), done.stderr
        store = f"sqlite:///{tmp_path / 'disk' / file.name}"
        full = "database or disk is full: free some space on its disk"
        assert done.stderr == f"error: cannot write to the run store {store}: {full}\n"


def test_runs_prune_frees_a_nearly_full_disk_a_batch_at_a_time(tmp_path: Path) -> None:
    """With room for a batch (SQLite writes each to its log first, about 6 MB here, and
    starts the log over once it is in the file) but not for every run at once (about the
    whole file), every one goes, and the file shrinks (was: one transaction for all of
    them, which did not fit: nothing deleted)."""
    file, _ = _store_of(tmp_path, 2_000)
    assert file.stat().st_size > 18_000_000  # more than the room: one transaction needs it
    done = _on_a_full_disk(file, 12_000_000, "runs", "prune", "--older-than", "1e-9", "--json")
    code, out = _exit(done)
    assert code == 0, done.stderr
    shown = json.loads(out)
    assert shown["finished"] == 2_001
    assert shown["bytes_after"] < shown["bytes_before"] // 10


def test_runs_prune_gives_the_room_of_the_runs_it_deleted_back(tmp_path: Path) -> None:
    """As `sessions prune` does: `VACUUM` (was: the file kept its size, 79 % of it free)."""
    file, store = _store_of(tmp_path, 300)
    before = file.stat().st_size
    done = cli("runs", "prune", "--older-than", "1e-9", "--store", store)
    assert done.returncode == 0, done.stderr
    after = file.stat().st_size
    assert after < before // 10
    assert done.stderr.splitlines() == [
        f"deleted 301 finished runs older than 1e-09 days from {store}",
        f"{file}: {before / 1e6:.1f} MB before, {after / 1e6:.1f} MB now",
    ]
    again = cli("runs", "prune", "--older-than", "1e-9", "--store", store, "--json")
    assert json.loads(again.stdout) == {
        "finished": 0,
        "stopped": None,
        "skipped": None,
        "bytes_before": after,
        "bytes_after": after,  # nothing to give back: no VACUUM
    }


def test_a_file_that_cannot_be_made_smaller_is_said_in_one_line_and_the_runs_stay_deleted(
    tmp_path: Path,
) -> None:
    """`VACUUM` writes a copy of what the file keeps: on a disk without room for it, the file
    keeps its size (SQLite reuses its room for new runs), and a line says so; the prune did
    what it was asked (exit 0)."""
    file, _ = _store_of(tmp_path, 600)
    with closing(sqlite3.connect(file)) as db, db:  # room left in the file, to give back
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("DELETE FROM workflow_status WHERE workflow_uuid LIKE 'c-1%'")
    done = _on_a_full_disk(file, 1_000_000, "runs", "prune", "--older-than", "1000", "--json")
    code, out = _exit(done)
    assert code == 0, done.stderr
    assert json.loads(out) == {
        "finished": 0,
        "stopped": None,
        "skipped": None,
        "bytes_before": None,
        "bytes_after": None,
    }
    copy = tmp_path / "disk" / file.name
    full = "database or disk is full: free some space on its disk"
    assert done.stderr == (
        f"{copy}: not made smaller (cannot write to the run store sqlite:///{copy}: {full}); "
        "new runs reuse its free room\n"
    )


async def test_keep_days_deletes_in_the_background_and_holds_nothing_up(
    tmp_path: Path,
) -> None:
    """The block (a run, a server) goes on while old runs are deleted, a batch at a time,
    and its end waits for the first batch only. Was: every old run deleted before the block,
    in one transaction (80,000 runs held the first `run` 36 s)."""
    file, store = _store_of(tmp_path, 2 * BATCH)

    def count() -> int:
        with closing(sqlite3.connect(f"file:{file}?mode=ro", uri=True)) as db:
            return db.execute("SELECT count(*) FROM workflow_status").fetchone()[0]

    async with open_runs(store, keep_days=0, unreachable_wait=60) as runs:
        with closing(sqlite3.connect(file, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")  # nothing can be deleted yet
            with anyio.fail_after(30):  # was: the prune waited for the lock before the block
                async with pruning(runs, 1e-9):
                    assert count() == 2 * BATCH + 1
                    other.execute("ROLLBACK")
    assert count() <= BATCH + 1  # the first batch at least
    assert {run["status"] for run in list_runs(store)} <= {"succeeded"}
