"""Chat memory in a SQLite file on a full disk says so, and what to do, as the run store does
(`database or disk is full: free some space on its disk`): it said "disk I/O error" when
SQLite could not grow the file's -shm, and lost nothing either way."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import time
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from agent import AssistantMessage, MemoryStoreError, UserMessage
from agent.memory import SQLiteStore, Summary
from tests.durable.cli_runs import REPO, SCRIPT, cli_env

pytestmark = pytest.mark.anyio

ROOM = "free some space on its disk"


def turn(text: str) -> list[UserMessage | AssistantMessage]:
    return [UserMessage(content=text), AssistantMessage(content="ok")]


async def test_a_write_the_file_has_no_room_for_says_to_free_space_and_keeps_the_rest(
    tmp_path: Path,
) -> None:
    path = tmp_path / "memory.sqlite3"
    store = SQLiteStore(path)
    assert await store.append("s", "k1", turn("q1"), [1, 1])
    connection = store._connection  # pyright: ignore[reportPrivateUsage]
    assert connection is not None
    # No page more: a write that needs one fails as on a full disk (SQLITE_FULL).
    connection.execute("PRAGMA max_page_count = 1").fetchone()
    full = f"chat memory {path}: database or disk is full: {ROOM}"
    with pytest.raises(MemoryStoreError) as caught:
        await store.append("s", "k2", turn("x" * 100_000), [1, 1])
    assert str(caught.value) == full
    assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
    with pytest.raises(MemoryStoreError) as caught:
        await store.put_summary("s", Summary(through=1, text="y" * 100_000))
    assert str(caught.value) == full
    assert [t.key for t in await store.turns("s")] == ["k1"]  # nothing lost, nothing half-kept
    assert await store.summary("s") is None
    await store.aclose()
    store = SQLiteStore(path)  # room again: it goes on
    assert await store.append("s", "k2", turn("x" * 100_000), [1, 1])
    assert [t.key for t in await store.turns("s")] == ["k1", "k2"]
    await store.aclose()


def _on_a_full_disk(
    folder: Path, memory: Path, *args: str, size_mb: int = 1, room: int = 0
) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` in a mount namespace of its own, where `folder` is a tmpfs of
    `size_mb` holding a copy of the file `memory` and `room` bytes more: a real full disk,
    gone with the process. Skipped where this process may not make one."""
    if shutil.which("unshare") is None:
        pytest.skip("no `unshare` to make a full disk with")
    folder.mkdir(exist_ok=True)
    fill = (
        f'mount -t tmpfs -o size={size_mb}m tmpfs "$1" && cp "$2" "$1"/ || exit 99; '
        f'cat /dev/zero > "$1"/filler 2>/dev/null; truncate -s -{room} "$1"/filler; '
        'shift 2; exec "$@"'
    )
    done = subprocess.run(
        [
            "unshare",
            "--mount",
            "sh",
            "-c",
            fill,
            "sh",
            str(folder),
            str(memory),
            str(SCRIPT),
            *args,
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env(),
        timeout=60,
    )
    if done.returncode == 99 or "unshare failed" in done.stderr:
        pytest.skip(f"cannot mount a tmpfs in a mount namespace here: {done.stderr.strip()}")
    return done


@pytest.mark.integration
async def test_a_full_disk_under_chat_memory_is_said_as_such_by_run_and_sessions(
    tmp_path: Path,
) -> None:
    """The -shm file cannot grow there, so SQLite says only "disk I/O error", reading too."""
    kept = tmp_path / "memory.sqlite3"
    store = SQLiteStore(kept)
    assert await store.append("s1", "k1", turn("q1"), [1, 1])
    await store.aclose()
    full = tmp_path / "full"
    on_it = full / kept.name
    said = (
        f"error: chat memory {on_it}: disk is full (disk I/O error growing its -shm file): {ROOM}"
    )
    for action in ("show", "delete"):
        done = _on_a_full_disk(
            full, kept, "sessions", action, "s1", "--store", f"sqlite:///{on_it}"
        )
        assert (done.returncode, done.stdout, done.stderr) == (1, "", f"{said}\n")
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "It is 5."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'[gateway]\nmemory = "sqlite:///{on_it}"\n[agents.a]\nmodel = "scripted:{script}"\n'
    )
    asked = ["run", "2 + 3?", "--config", str(config), "--session", "s1"]
    done = _on_a_full_disk(full, kept, *asked, "--no-store")
    assert (done.returncode, done.stdout) == (1, ""), done.stderr
    assert done.stderr.splitlines()[0] == said


@pytest.mark.integration
def test_sessions_prune_on_a_disk_with_no_room_to_vacuum_says_so_and_keeps_its_work(
    tmp_path: Path,
) -> None:
    """VACUUM writes a copy of what the file keeps: with no room for it the sessions stay
    deleted, a line says the file was not made smaller, and the prune did what it was asked
    (exit 0, as `runs prune`). It exited 1 with the store's error, as if nothing was done."""
    kept = tmp_path / "memory.sqlite3"
    ids = [f"s{n}" for n in range(300)]

    async def keep() -> None:
        store = SQLiteStore(kept)
        for session_id in ids:
            await store.append(session_id, "k", turn("x" * 20_000), [1, 1])
        await store.aclose()

    anyio.run(keep)
    with closing(sqlite3.connect(kept)) as db, db:  # s0..s99 unused for a year
        db.executemany(
            "UPDATE memory_turns SET created_at = ? WHERE session_id = ?",
            [(time.time() - 366 * 86400, session_id) for session_id in ids[:100]],
        )
    full = tmp_path / "full"
    on_it = full / kept.name
    store = ["--store", f"sqlite:///{on_it}"]
    done = _on_a_full_disk(
        full,
        kept,
        "sessions",
        "prune",
        "--older-than",
        "365",
        "--json",
        *store,
        size_mb=16,
        room=3_000_000,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"deleted": 100, "bytes_before": None, "bytes_after": None}
    assert done.stderr.startswith(f"{on_it}: not made smaller (chat memory {on_it}: ")
    assert done.stderr.endswith("); new turns reuse its free room\n")
    assert len(done.stderr.splitlines()) == 1
