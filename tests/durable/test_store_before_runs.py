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
