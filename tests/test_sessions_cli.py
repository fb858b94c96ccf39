"""`sessions list` shows the newest 100 sessions, as `runs list` shows runs (`--limit N`, 0: all,
a line on stderr when there are more), and `sessions delete|prune --json` print JSON."""

from __future__ import annotations

import json
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from agent import UserMessage
from agent.memory import SQLiteStore
from agent.memory.redis_store import RedisStore
from gateway.cli import main

MORE = "the newest {} sessions; there are more: --limit N shows N, --limit 0 all\n"


def _kept(file: Path, count: int, *, text: str = "Hi") -> list[str]:
    """`count` one-turn sessions in `file`, s0 the oldest (a minute apart); newest first."""
    ids = [f"s{n}" for n in range(count)]

    async def keep() -> None:
        store = SQLiteStore(file)
        for session_id in ids:
            await store.append(session_id, "k", [UserMessage(content=text)], [1])
        await store.aclose()

    anyio.run(keep)
    now = time.time()
    with closing(sqlite3.connect(file)) as db, db:
        db.executemany(
            "UPDATE memory_turns SET created_at = ? WHERE session_id = ?",
            [(now - (count - n) * 60, session_id) for n, session_id in enumerate(ids)],
        )
    return ids[::-1]


def test_sessions_list_shows_the_newest_hundred_and_says_when_there_are_more(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It printed every session: 100,001 lines in 7.5 s for 100,000, and had no --limit."""
    file = tmp_path / "memory.sqlite3"
    newest = _kept(file, 103)
    store = ["--store", f"sqlite:///{file}"]
    assert main(["sessions", "list", *store]) == 0
    listed = capsys.readouterr()
    assert [line.split()[0] for line in listed.out.splitlines()] == newest[:100]
    assert listed.err == MORE.format(100)
    assert main(["sessions", "list", "--limit", "2", "--json", *store]) == 0
    listed = capsys.readouterr()
    assert [info["session_id"] for info in json.loads(listed.out)] == ["s102", "s101"]
    assert listed.err == MORE.format(2)
    for every in ("0", "103"):
        assert main(["sessions", "list", "--limit", every, "--json", *store]) == 0
        listed = capsys.readouterr()
        assert [info["session_id"] for info in json.loads(listed.out)] == newest
        assert listed.err == ""  # none left out
    with pytest.raises(SystemExit) as refused:
        main(["sessions", "list", "--limit", "-1", *store])
    assert refused.value.code == 2
    assert "not a number of sessions (0 or more): '-1'" in capsys.readouterr().err
    assert main(["sessions", "show", "s1", "--limit", "5", *store]) == 2
    assert capsys.readouterr().err == "error: --limit is for sessions list, not sessions show\n"


def test_an_unreachable_postgres_store_is_one_line_as_runs_say_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`sessions list` printed libpq's hint on a second line, where `runs list` says one."""
    store = ["--store", "postgresql://gw:secretpw@127.0.0.1:1/x"]
    assert main(["sessions", "list", *store]) == 1
    sessions = capsys.readouterr().err
    assert main(["runs", "list", *store]) == 1
    runs = capsys.readouterr().err
    for said in (sessions, runs):
        assert said.count("\n") == 1, said
        assert "secretpw" not in said
        assert said.endswith("port 1 failed: Connection refused\n"), said
    assert sessions.startswith("error: chat memory postgresql://gw:***@127.0.0.1:1/x: ")


def test_sessions_delete_and_prune_print_json_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--json` was taken and plain text printed: `deleted session 's2'`."""
    file = tmp_path / "memory.sqlite3"
    _kept(file, 30, text="x" * 20_000)  # s0..s29, s0 30 minutes old
    store = ["--store", f"sqlite:///{file}"]
    assert main(["sessions", "delete", "s29", "--json", *store]) == 0
    assert json.loads(capsys.readouterr().out) == {"session_id": "s29", "deleted": True}
    size = file.stat().st_size
    days = str(10.5 / 1440)  # those not used for 10.5 minutes: s0..s19
    assert main(["sessions", "prune", "--older-than", days, "--json", *store]) == 0
    pruned = json.loads(capsys.readouterr().out)
    assert pruned["deleted"] == 20
    assert pruned["bytes_before"] == size
    assert pruned["bytes_after"] == file.stat().st_size < size / 2  # VACUUM gave it back
    assert main(["sessions", "list", "--json", "--limit", "0", *store]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 9
    missing = ["--store", f"sqlite:///{tmp_path / 'none.sqlite3'}"]
    assert main(["sessions", "prune", "--older-than", "1", "--json", *missing]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "deleted": 0,
        "bytes_before": None,
        "bytes_after": None,
    }
    assert not (tmp_path / "none.sqlite3").exists()


def test_sessions_prune_json_of_a_store_with_no_file_has_no_sizes(
    redis_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    session = f"new-{uuid.uuid4().hex}"

    async def keep() -> None:
        store = RedisStore(redis_url)
        await store.append(session, "k", [UserMessage(content="Hi")], [1])
        await store.aclose()

    anyio.run(keep)
    store = ["--store", redis_url, "--json"]
    assert main(["sessions", "prune", "--older-than", "1", *store]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "deleted": 0,  # used a moment ago
        "bytes_before": None,
        "bytes_after": None,
    }
    assert main(["sessions", "delete", session, *store]) == 0
    assert json.loads(capsys.readouterr().out) == {"session_id": session, "deleted": True}
