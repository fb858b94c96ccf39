"""The run store keeps JSON only, and a record in Python's pickle format is refused unread,
naming its run: one planted by someone who can write the store runs no code in `runs list`,
`runs show` or `resume`. A store an older version wrote (every record pickled) is read with
`[store] read_pickled = true` or `AGENT_GATEWAY_READ_PICKLED=1`. On SQLite and PostgreSQL.

Each opening of the store here has an event loop of its own (`anyio.run`): DBOS, destroyed as
a store closes, shuts down the loop's default executor."""

from __future__ import annotations

import base64
import json
import pickle
import re
import sqlite3
from collections.abc import Generator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.durable import open_runs
from gateway.durable.record_format import READ_PICKLED_ENV
from gateway.errors import GatewayError, PickledRecord
from gateway.run_state import RunResult, RunState
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

from .cli_runs import cli, cli_env

REFUSED = "is stored in Python's pickle format"
CALL = "tool 0 b"
ERASE = ScriptedAnswer(tool_calls=[ScriptedCall(name="erase", id="b", arguments={"text": "B"})])


class _Marker:
    """Unpickled, it writes a file: what a planted row could do (any code)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (Path.write_text, (self.path, "unpickled"))


def _planted(marker: Path) -> str:
    return base64.b64encode(pickle.dumps(_Marker(marker))).decode()


@contextmanager
def _database(store: str) -> Generator[Any]:
    """A DB-API connection to the store's database, DBOS's tables by their bare names."""
    if store.startswith("sqlite:///"):
        with closing(sqlite3.connect(store.removeprefix("sqlite:///"))) as db:
            yield db
            db.commit()
    else:
        with psycopg.connect(store, autocommit=True) as db:
            db.execute("SET search_path TO dbos")
            yield db


def _placeholder(store: str) -> str:
    return "?" if store.startswith("sqlite:") else "%s"


def _tables(db: Any, store: str) -> list[str]:
    """DBOS's tables with a `serialization` column (each row's format)."""
    if store.startswith("sqlite:"):
        names = [n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [
            n
            for n in names
            if any(c[1] == "serialization" for c in db.execute(f"PRAGMA table_info({n})"))
        ]
    rows = db.execute(
        "SELECT table_name FROM information_schema.columns "
        "WHERE table_schema = 'dbos' AND column_name = 'serialization'"
    ).fetchall()
    return [n for (n,) in rows]


def _formats(store: str) -> dict[str, set[str | None]]:
    """Each table's row formats."""
    with _database(store) as db:
        return {
            table: {f for (f,) in db.execute(f"SELECT DISTINCT serialization FROM {table}")}
            for table in _tables(db, store)
        }


def _gated(answers: list[ScriptedAnswer | str], erased: list[str]) -> Gateway:
    """A gateway whose tool `erase` waits for approval; `erased` hears what it erased."""

    def erase(text: str) -> str:
        """Erase a text."""
        erased.append(text)
        return f"erased {text}"

    spec = AgentSpec(
        "assistant", ScriptedModel(answers), tools=["log"], approval=ApprovalRule(["erase"])
    )
    return Gateway([FunctionToolkit("log", [function_tool(erase)])], [spec])


def _interrupted_waiting_run(store: str) -> str:
    """A run whose call waits for approval, its process gone (interrupted)."""

    async def go() -> str:
        async with open_runs(store) as runs:
            runs.use(_gated([ERASE], []))
            state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
            await runs.begin(state)
            with anyio.fail_after(20):
                assert await runs.follow(state.run_id) != []
            runs.interrupt(state.run_id)
            with anyio.fail_after(20), pytest.raises(GatewayError, match="interrupted"):
                await runs.follow(state.run_id, pause=False)
        return state.run_id

    return anyio.run(go)


def _approved_and_finished(
    store: str, run_id: str, erased: list[str], *, read_pickled: bool = False
) -> RunResult | list[ApprovalRequest]:
    """The run's call approved, and the run taken over here (another process) to its end."""

    async def go() -> RunResult | list[ApprovalRequest]:
        async with open_runs(store, read_pickled=read_pickled) as runs:
            runs.use(_gated(["done"], erased))  # its first answer is recorded
            await runs.decide(run_id, CALL, Decision(approved=True), by="ann@desk")
            await runs.adopt(run_id)
            with anyio.fail_after(20):
                return await runs.follow(run_id)

    return anyio.run(go)


def test_a_run_keeps_only_json_through_approval_resume_and_show(store: str) -> None:
    run_id = _interrupted_waiting_run(store)
    erased: list[str] = []
    result = _approved_and_finished(store, run_id, erased)
    assert isinstance(result, RunResult)
    assert (result.items[0].output, erased) == ("done", ["B"])

    formats = _formats(store)
    assert {"workflow_status", "operation_outputs", "workflow_events", "notifications"} <= set(
        formats
    )
    written = set[str | None]().union(*formats.values())
    assert written - {None} == {"portable_json"}, formats  # None: a row that keeps no value

    shown = cli("runs", "show", run_id, "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert (data["status"], data["agent"]) == ("succeeded", "assistant")
    assert data["result"]["items"][0]["output"] == "done"
    [tool] = [c for c in data["calls"] if c["kind"] == "tool"]
    assert (tool["name"], tool["output"]) == ("erase", {"response": "erased B"})


def test_a_planted_pickle_runs_no_code_and_is_refused_naming_its_run(
    store: str, tmp_path: Path
) -> None:
    run_id = _interrupted_waiting_run(store)
    marker = tmp_path / "marker"
    mark = _placeholder(store)
    with _database(store) as db:  # as the tester did: the run's `execution` event replaced
        db.execute(
            f"UPDATE workflow_events SET value = {mark}, serialization = 'py_pickle' "
            f"WHERE workflow_uuid = {mark} AND key = 'execution'",
            (_planted(marker), run_id),
        )

    for command in (("runs", "show", run_id), ("runs", "resume", run_id)):
        done = cli(*command, "--store", store)
        assert done.returncode != 0, command
        assert f"run {run_id} {REFUSED}" in done.stderr, (command, done.stderr)
        assert "read_pickled = true" in done.stderr
        assert "Traceback" not in done.stderr
    # The list goes on without it, and says so (the other runs of an older store are seen).
    listed = cli("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert run_id not in listed.stdout
    assert f"1 run is not listed ({run_id}): each is stored in Python's pickle" in listed.stderr
    assert "read_pickled = true" in listed.stderr

    async def adopt() -> None:
        async with open_runs(store) as runs:
            await runs.adopt(run_id)

    with pytest.raises(PickledRecord, match=f"^run {run_id} {REFUSED}"):
        anyio.run(adopt)
    assert not marker.exists()


@pytest.mark.parametrize("where", ["step", "input", "decision"])
def test_a_pickle_in_any_record_of_a_run_is_refused(where: str, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run_id = _interrupted_waiting_run(store)
    marker = tmp_path / "marker"
    with _database(store) as db:
        if where == "step":  # the model's recorded answer
            db.execute(
                "UPDATE operation_outputs SET output = ?, serialization = 'py_pickle' "
                "WHERE workflow_uuid = ? AND function_name LIKE 'model%'",
                (_planted(marker), run_id),
            )
        elif where == "input":
            db.execute(
                "UPDATE workflow_input SET inputs = ? WHERE workflow_uuid = ?",
                (_planted(marker), run_id),
            )
            db.execute(
                "UPDATE workflow_status SET serialization = 'py_pickle' WHERE workflow_uuid = ?",
                (run_id,),
            )
        else:  # a decision waiting for the run, as `runs approve` sends it
            db.execute(
                "INSERT INTO notifications (destination_uuid, topic, message, serialization) "
                "VALUES (?, 'approval', ?, 'py_pickle')",
                (run_id, _planted(marker)),
            )

    async def resume() -> None:
        async with open_runs(store) as runs:
            runs.use(_gated(["done"], []))
            if where == "input":
                await runs.list()
            await runs.adopt(run_id)
            with anyio.fail_after(20):
                await runs.follow(run_id, pause=False)

    # A decision is said to be one: the run is JSON, an older agent-gateway's `runs approve`
    # pickled what it sent.
    refused = (
        f"run {run_id} has a decision (approve or deny) from an older agent-gateway, stored "
        "in Python's pickle format"
        if where == "decision"
        else f"run {run_id} {REFUSED}"
    )
    with pytest.raises(PickledRecord, match=f"^{re.escape(refused)}"):
        anyio.run(resume)
    assert not marker.exists()


def _as_an_older_version_wrote_it(store: str) -> None:
    """Every record pickled, as DBOS's default serializer wrote them before: each value as
    it was, a workflow's input as `{"args": (...), "kwargs": {...}}`."""
    with _database(store) as db:
        for run, text in db.execute("SELECT workflow_uuid, inputs FROM workflow_input").fetchall():
            args = json.loads(text)
            native = {"args": tuple(args["positionalArgs"]), "kwargs": args["namedArgs"]}
            db.execute(
                "UPDATE workflow_input SET inputs = ? WHERE workflow_uuid = ?",
                (_pickled(native), run),
            )
        for table in _tables(db, store):
            columns = {
                "workflow_status": ["output"],
                "operation_outputs": ["output"],
                "workflow_events": ["value"],
                "workflow_events_history": ["value"],
                "notifications": ["message"],
                "streams": ["value"],
            }[table]
            for column in columns:
                rows = db.execute(f"SELECT rowid, {column} FROM {table}").fetchall()
                for rowid, text in rows:
                    if text is not None:
                        value = _pickled(json.loads(text))
                        db.execute(
                            f"UPDATE {table} SET {column} = ? WHERE rowid = ?", (value, rowid)
                        )
            db.execute(
                f"UPDATE {table} SET serialization = 'py_pickle' WHERE {columns[0]} IS NOT NULL OR serialization IS NOT NULL"
            )


def _pickled(value: Any) -> str:
    return base64.b64encode(pickle.dumps(value)).decode()


def test_an_older_versions_store_is_read_with_read_pickled(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run_id = _interrupted_waiting_run(store)
    _as_an_older_version_wrote_it(store)
    assert set[str | None]().union(*_formats(store).values()) - {None} == {"py_pickle"}

    unread = cli("runs", "list", "--store", store)
    assert unread.returncode == 0, unread.stderr
    assert f"1 run is not listed ({run_id}): each is stored in Python's pickle" in unread.stderr
    refused = cli("runs", "show", run_id, "--store", store)
    assert refused.returncode != 0
    assert f"run {run_id} {REFUSED}" in refused.stderr

    env = {**cli_env(), READ_PICKLED_ENV: "1"}
    listed = _cli_with(env, "runs", "list", "--json", "--store", store)
    [info] = json.loads(listed)
    assert (info["run_id"], info["status"], info["agent"]) == (
        run_id,
        "waiting_approval",
        "assistant",
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(f'[store]\nurl = "{store}"\nread_pickled = true\n')
    shown = json.loads(
        _cli_with(cli_env(), "runs", "show", run_id, "--json", "--config", str(config))
    )
    assert shown["state"]["agent"] == "assistant"
    assert [w["tool"] for w in shown["waiting"]] == ["erase"]

    erased: list[str] = []
    result = _approved_and_finished(store, run_id, erased, read_pickled=True)
    assert isinstance(result, RunResult)
    assert (result.items[0].output, erased) == ("done", ["B"])
    # What it recorded since is JSON (its own end is in its input's format: DBOS's rule).
    with _database(store) as db:
        steps = db.execute(
            "SELECT serialization FROM operation_outputs WHERE function_name = 'tool 0 b'"
        ).fetchall()
    assert steps == [("portable_json",)]


def _cli_with(env: dict[str, str], *args: str) -> str:
    import subprocess

    from .cli_runs import REPO, SCRIPT

    done = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=env, timeout=40
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_prune_stopped_says_it_skipped_the_runs_an_older_version_stored(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    run_id = _interrupted_waiting_run(store)
    _as_an_older_version_wrote_it(store)

    prune = ("runs", "prune", "--older-than", "0.000001", "--stopped", "--store", store)
    pruned = cli(*prune, "--json")
    assert pruned.returncode == 0, pruned.stderr
    shown = json.loads(pruned.stdout)
    assert shown.pop("bytes_before") >= shown.pop("bytes_after") > 0  # the file's size
    assert shown == {"finished": 0, "stopped": 0, "skipped": 1}
    said = (
        f"1 run not ended ({run_id}) was skipped, not pruned, stopped or not: it is stored "
        "in Python's pickle format"
    )
    assert said in pruned.stderr
    assert "read_pickled = true" in pruned.stderr
    assert "not listed" not in pruned.stderr
    told = cli(*prune)
    assert told.returncode == 0, told.stderr
    assert said in told.stderr
    assert "and 0 stopped runs (1 not read, skipped) older than" in told.stderr
    # Still there.
    env = {**cli_env(), READ_PICKLED_ENV: "1"}
    [info] = json.loads(_cli_with(env, "runs", "list", "--json", "--store", store))
    assert info["run_id"] == run_id
