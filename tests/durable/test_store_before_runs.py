"""A run store that chat memory made before any run was stored lists no runs, on SQLite and
PostgreSQL alike (`runs list` failed on the runs' missing tables)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from gateway.cli import main


def test_a_store_with_chat_memory_alone_lists_no_runs(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if store.startswith("postgresql:"):  # a database of its own, as a user would make it
        server, name = store.rsplit("/", 1)
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "Hello."}]))
    monkeypatch.setattr("sys.stdin", io.StringIO("Hi\n"))
    chat = ["chat", "--model", f"scripted:{script}", "--session", "s1", "--store", store]
    assert main(chat) == 0
    assert "Hello." in capsys.readouterr().out
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    assert capsys.readouterr().out == "[]\n"
    assert main(["runs", "show", "r1", "--store", store]) == 2
    assert "no runs are stored in" in capsys.readouterr().err


def test_a_store_that_does_not_exist_is_named_by_list_and_prune(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped `--store` or `--state-dir` listed nothing and pruned "0 runs", exit 0,
    without a word: the one place the user could learn of the typo."""
    store = f"sqlite:///{tmp_path / 'typo.sqlite3'}"
    assert main(["runs", "list", "--store", store]) == 0
    said = capsys.readouterr()
    assert (said.out, said.err) == ("", f"no runs are stored in {store}\n")
    assert main(["runs", "list", "--state-dir", str(tmp_path / "nodir")]) == 0
    assert capsys.readouterr().err == (
        f"no runs are stored in sqlite:///{tmp_path / 'nodir' / 'agent-gateway.sqlite3'}\n"
    )
    assert main(["runs", "prune", "--older-than", "1", "--store", store]) == 0
    assert capsys.readouterr().err == f"no runs are stored in {store}: none deleted\n"
    assert main(["runs", "list", "--store", store, "--json"]) == 0
    assert capsys.readouterr() == ("[]\n", "")  # the JSON alone, as for a store of none
    assert not (tmp_path / "typo.sqlite3").exists()  # looking made nothing
