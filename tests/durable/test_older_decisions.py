"""A decision an older agent-gateway sent to a run (`runs approve|deny` before the JSON-only
store: a pickled DBOS message with no idempotency key) is the run's decision: the run takes it
first, so it is shown as the decision, and a second one is refused. Read only with
`read_pickled`; without, the run's calls are neither decided nor resumed, and each refusal
says why (and how to resume). On SQLite and PostgreSQL, through the command line."""

from __future__ import annotations

import base64
import json
import pickle
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gateway.cli import main
from gateway.durable.record_format import READ_PICKLED_ENV

from .cli_runs import tool_call

OLDER = "from an older agent-gateway, stored in Python's pickle format"


def _waiting_run(tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]) -> str:
    """A `--no-wait` run of `guarded` (approval required), its call c1 waiting."""
    (tmp_path / "model.json").write_text(
        json.dumps([{"tool_calls": [tool_call("guarded", "c1", text="hi")]}])
    )
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.guarded]\npython = "tests.sample_tools:shout"\n'
        f'[agents.helper]\nmodel = "scripted:{tmp_path / "model.json"}"\n'
        'tools = ["guarded"]\nrequire_approval = ["guarded"]\n'
    )
    args = ["run", "go", "--config", str(config), "--no-wait", "--json", "--store", store]
    assert main(args) == 3
    return json.loads(capsys.readouterr().out)["run_id"]


def _connect(store: str) -> Any:
    if store.startswith("sqlite:///"):
        return closing(sqlite3.connect(store.removeprefix("sqlite:///")))
    return psycopg.connect(store, autocommit=True)


def _send_as_an_older_version(store: str, run_id: str, call: str, *, approved: bool) -> None:
    """What an older `runs approve|deny` stored: the decision pickled, no idempotency key."""
    message = {"call": call, "approved": approved, "message": None if approved else "no way"}
    pickled = base64.b64encode(pickle.dumps(message)).decode()
    table = "notifications" if store.startswith("sqlite:") else "dbos.notifications"
    mark = "?" if store.startswith("sqlite:") else "%s"
    with _connect(store) as db:
        db.execute(
            f"INSERT INTO {table} (destination_uuid, topic, message, serialization) "
            f"VALUES ({mark}, 'approval', {mark}, 'py_pickle')",
            (run_id, pickled),
        )
        if store.startswith("sqlite:"):
            db.commit()


def _decisions(store: str, run_id: str) -> int:
    table = "notifications" if store.startswith("sqlite:") else "dbos.notifications"
    mark = "?" if store.startswith("sqlite:") else "%s"
    with _connect(store) as db:
        [(count,)] = db.execute(
            f"SELECT count(*) FROM {table} WHERE destination_uuid = {mark}", (run_id,)
        ).fetchall()
    return count


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.mark.parametrize("approved", [True, False])
def test_an_older_versions_decision_is_the_one_shown_and_taken_and_a_second_is_refused(
    tmp_path: Path,
    store: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    approved: bool,
) -> None:
    run_id = _waiting_run(tmp_path, store, capsys)
    _code, out, _err = _cli(capsys, "runs", "list", "--json", "--store", store)
    [call] = [w["call"] for w in json.loads(out)[0]["waiting"]]
    _send_as_an_older_version(store, run_id, call, approved=approved)
    monkeypatch.setenv(READ_PICKLED_ENV, "1")  # as the docs say, for an older version's store

    verdict = "approved" if approved else "denied"
    _code, shown, _err = _cli(capsys, "runs", "show", run_id, "--store", store)
    assert f"tool guarded  c1  (decided, not run yet)  {verdict}" in shown
    opposite = "deny" if approved else "approve"
    code, _out, err = _cli(capsys, "runs", opposite, run_id, "c1", "--store", store)
    assert code == 2
    assert err.startswith(
        f"error: call c1 of run {run_id} is already decided ({verdict}, by an older agent-gateway)"
    )
    assert _decisions(store, run_id) == 1  # the refused one was not sent

    (tmp_path / "model.json").write_text(json.dumps([{"content": "done"}]))  # the new process's
    code, out, err = _cli(capsys, "resume", run_id, "--no-wait", "--store", store)
    assert (code, out) == (0, "done\n"), err
    _code, shown, _err = _cli(capsys, "runs", "show", run_id, "--json", "--store", store)
    [guarded] = [c for c in json.loads(shown)["calls"] if c["call_id"] == "c1"]
    assert guarded["approval"]["approved"] is approved
    assert guarded["output"] == ({"response": "HI"} if approved else _rejected())


def _rejected() -> str:
    return "The user rejected the tool call to guarded; it did not run. The user said: no way"


def test_without_read_pickled_an_older_versions_decision_refuses_deciding_and_resuming(
    tmp_path: Path, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run_id = _waiting_run(tmp_path, store, capsys)
    _code, out, _err = _cli(capsys, "runs", "list", "--json", "--store", store)
    [call] = [w["call"] for w in json.loads(out)[0]["waiting"]]
    _send_as_an_older_version(store, run_id, call, approved=True)
    told = f"run {run_id} has a decision (approve or deny) {OLDER}"

    code, _out, err = _cli(capsys, "runs", "deny", run_id, "c1", "--store", store)
    assert code != 0
    assert err.startswith(f"error: {told}")
    assert "read_pickled = true" in err
    assert "denied" not in err
    assert _decisions(store, run_id) == 1

    # Listed, its call waiting, and why it is not decided.
    _code, out, _err = _cli(capsys, "runs", "list", "--json", "--store", store)
    [info] = json.loads(out)
    assert (info["run_id"], info["status"]) == (run_id, "waiting_approval")
    assert info["error"].startswith(told)

    code, _out, err = _cli(capsys, "resume", run_id, "--no-wait", "--store", store)
    assert code != 0
    assert f"error: {told}" in err
    # The way on that can work: reading it allowed.
    assert (
        f"the run is stored: if you trust its writers, {READ_PICKLED_ENV}=1 agent-gateway "
        f"resume {run_id}"
    ) in err
    _code, shown, _err = _cli(capsys, "runs", "show", run_id, "--json", "--store", store)
    assert "HI" not in shown  # the tool did not run
