"""A run store that cannot be used now is exit 1 with `--json`'s object, and says what to do:
a PostgreSQL server shutting down as it is opened, a user refused a right (to connect, to
make DBOS's schema, to make the database: as chat memory's store says it), a SQLite store on
a read-only filesystem. Only a URL or file that is not a store is bad input (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy
from psycopg import sql
from sqlalchemy.exc import OperationalError

from gateway.cli.exits import FAILED, exit_code
from gateway.durable import open_runs
from gateway.durable.store_failures import NO_FOLDER, READ_ONLY, store_failure
from gateway.errors import StoreUnavailable

from .cli_runs import cli, script_model

pytestmark = pytest.mark.integration


def test_a_server_shutting_down_as_the_store_opens_is_unreachable(postgres_url: str) -> None:
    """psycopg says so with a subclass of its OperationalError (AdminShutdown): was bad input."""
    engine = sqlalchemy.create_engine(postgres_url.replace("postgresql:", "postgresql+psycopg:"))
    try:
        with engine.connect() as connection, psycopg.connect(postgres_url) as admin:
            pid = connection.exec_driver_sql("SELECT pg_backend_pid()").scalar()
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            with pytest.raises(OperationalError) as raised:
                connection.exec_driver_sql("SELECT 1")
    finally:
        engine.dispose()
    assert isinstance(raised.value.orig, psycopg.errors.AdminShutdown)
    failure = store_failure(postgres_url, raised.value)
    assert isinstance(failure, StoreUnavailable)
    assert exit_code(failure) == FAILED
    assert str(failure).startswith(f"cannot open the run store {postgres_url}: terminating ")


@pytest.fixture
def weak_user(postgres_url: str) -> Iterator[str]:
    """A server URL (no database) for a user who may not create databases, with `weak_c`
    (CONNECT, no CREATE) and `weak_n` (no CONNECT) made for it."""
    user = f"weak_{uuid.uuid4().hex[:8]}"
    databases = [f"{user}_c", f"{user}_n"]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(user)))
        for name in databases:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            admin.execute(
                sql.SQL("REVOKE {} ON DATABASE {} FROM PUBLIC").format(
                    sql.SQL("CREATE" if name.endswith("_c") else "ALL"), sql.Identifier(name)
                )
            )
    with psycopg.connect(f"{postgres_url.rsplit('/', 1)[0]}/{user}_c", autocommit=True) as db:
        db.execute("REVOKE CREATE ON SCHEMA public FROM PUBLIC")
    try:
        yield postgres_url.rsplit("/", 1)[0].replace("postgres@", f"{user}@")
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            for name in databases:
                admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(user)))


@pytest.mark.anyio
async def test_a_right_the_store_needs_is_named_with_how_to_grant_it(weak_user: str) -> None:
    user = weak_user.split("//")[1].split("@")[0]
    expected = {
        f"{user}_c": "its user needs the CREATE right on it, for DBOS's schema `dbos`: "
        f"`GRANT CREATE ON DATABASE {user}_c TO {user}` as its owner",
        f"{user}_n": f"its user needs the CONNECT right on it: "
        f"`GRANT CONNECT ON DATABASE {user}_n TO {user}` as its owner",
        f"{user}_new": f"database '{user}_new' does not exist, and creating it failed "
        f"(permission denied to create database): create it (`createdb {user}_new`, or "
        "CREATE DATABASE as its owner)",
    }
    for name, advice in expected.items():
        with pytest.raises(StoreUnavailable) as raised:  # was: StoreError (exit 2), no advice
            async with open_runs(f"{weak_user}/{name}"):
                pass
        said = str(raised.value)
        assert said.startswith(f"cannot open the run store {weak_user}/{name}: "), said
        assert said.endswith(advice), said
        assert "\n" not in said


class Sealable:
    """A directory to make read-only: root, who may write anywhere, makes it a read-only
    bind mount; anyone else, who may not mount, takes its write right away."""

    def __init__(self, place: Path) -> None:
        self.place, self.mounted = place, False

    def seal(self) -> None:
        if os.geteuid() != 0:
            self.place.chmod(0o500)
            return
        if subprocess.run(["mount", "--bind", self.place, self.place]).returncode != 0:
            pytest.skip("root here may not mount (no CAP_SYS_ADMIN)")
        self.mounted = True
        subprocess.run(["mount", "-o", "remount,ro,bind", self.place], check=True)

    def unseal(self) -> None:
        if self.mounted:
            subprocess.run(["umount", self.place], check=True)
        else:
            self.place.chmod(0o700)


@pytest.fixture
def sealable(tmp_path: Path) -> Iterator[Sealable]:
    place = tmp_path / "ro"
    place.mkdir()
    directory = Sealable(place)
    try:
        yield directory
    finally:
        directory.unseal()


def test_a_sqlite_store_on_a_read_only_filesystem_says_so_and_fails_the_run(
    tmp_path: Path, sealable: Sealable
) -> None:
    model = script_model(tmp_path / "a.json", {"content": "hi"})
    old, new = sealable.place / "runs.sqlite3", sealable.place / "sub" / "runs.sqlite3"
    assert cli("run", "first", "--store", f"sqlite:///{old}", "--model", model).returncode == 0
    sealable.seal()
    # A store with a run in it; one to be made, in a directory that cannot be made there.
    missing = NO_FOLDER.format(folder=new.parent, parent=sealable.place)
    for file, advice in ((old, READ_ONLY), (new, missing)):
        store = f"sqlite:///{file}"
        done = cli("run", "go", "--store", store, "--model", model, "--json")
        assert done.returncode == 1, done.stderr  # was: 2, and no JSON
        [said] = done.stderr.splitlines()
        assert said.startswith(f"error: cannot open the run store {store}: "), said
        assert said.endswith(f": {advice}"), said
        printed = json.loads(done.stdout)
        assert (printed["run_id"], printed["status"]) == (None, "failed")
        assert printed["error"] == said.removeprefix("error: ")


def test_a_read_only_store_can_be_looked_into(tmp_path: Path, sealable: Sealable) -> None:
    """A backup, another user's store, a directory made read-only: `runs list`, `runs show`,
    `sessions list` and `sessions show` failed with 'attempt to write a readonly database'."""
    model = script_model(tmp_path / "a.json", {"content": "kept"})
    store = ["--store", f"sqlite:///{sealable.place / 'runs.sqlite3'}"]
    done = cli("run", "first", *store, "--model", model, "--session", "s1", "--json")
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    sealable.seal()
    listed = cli("runs", "list", "--json", *store)
    assert listed.returncode == 0, listed.stderr
    assert [run["run_id"] for run in json.loads(listed.stdout)] == [run_id]
    shown = cli("runs", "show", run_id, *store)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert "answer: kept\n" in shown.stdout
    sessions = cli("sessions", "list", "--json", *store)
    assert sessions.returncode == 0, sessions.stderr
    assert [s["session_id"] for s in json.loads(sessions.stdout)] == ["s1"]
    turns = cli("sessions", "show", "s1", *store)
    assert (turns.returncode, turns.stderr) == (0, "")
    assert "assistant: kept" in turns.stdout
    assert sorted(p.name for p in sealable.place.iterdir()) == ["runs.sqlite3"]
