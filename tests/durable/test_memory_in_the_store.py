"""Chat memory is kept in the run store's database when runs are stored: one SQLite file (or
one PostgreSQL database) holds the runs and the conversations."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import psycopg
import pytest

from gateway.cli import main
from tests.servers.openai_stub import openai_stub


def _tables(file: Path) -> set[str]:
    with sqlite3.connect(file) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _conversation(tmp_path: Path, *store: str) -> list[dict[str, object]]:
    """Two runs of one session; the messages of the second model call."""
    with openai_stub(["I will remember, Ada.", "You are Ada."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(f'[agents.assistant]\nmodel = "{model.spec}"\n')
        for question in ("I am Ada.", "Who am I?"):
            command = ["run", question, "--config", str(config), "--session", "s1", *store]
            assert main(command) == 0
        return model.messages(1)


def _carries_the_first_turn(sent: list[dict[str, object]]) -> None:
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert [m["content"] for m in sent[1:]] == ["I am Ada.", "I will remember, Ada.", "Who am I?"]


def test_the_default_file_holds_runs_and_conversations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _carries_the_first_turn(_conversation(tmp_path))
    file = Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3"
    assert {"workflow_status", "memory_turns"} <= _tables(file)
    assert [p.name for p in file.parent.glob("*.sqlite3")] == [file.name]
    capsys.readouterr()
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr().out.startswith("s1 ")


def test_a_named_sqlite_store_holds_the_conversations_too(tmp_path: Path) -> None:
    file = tmp_path / "elsewhere" / "runs.sqlite3"
    _carries_the_first_turn(_conversation(tmp_path, "--store", f"sqlite:///{file}"))
    assert {"workflow_status", "memory_turns"} <= _tables(file)
    assert not (Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3").exists()


def test_a_postgresql_store_holds_the_conversations_too(tmp_path: Path, postgres_url: str) -> None:
    url = f"{postgres_url.rsplit('/', 1)[0]}/memory_and_runs"
    _carries_the_first_turn(_conversation(tmp_path, "--store", url))
    with psycopg.connect(url) as db:
        turns = db.execute("SELECT count(*) FROM memory_turns WHERE session_id = 's1'").fetchone()
        runs = db.execute("SELECT count(*) FROM dbos.workflow_status").fetchone()
    assert turns == (2,)
    assert runs == (2,)
    assert not (Path(os.environ["AGENT_GATEWAY_DATA_DIR"]) / "agent-gateway.sqlite3").exists()
