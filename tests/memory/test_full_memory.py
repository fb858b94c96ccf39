"""Chat memory in a SQLite file on a full disk says so, and what to do, as the run store does
(`database or disk is full: free some space on its disk`): it said "disk I/O error" when
SQLite could not grow the file's -shm, and lost nothing either way."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

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


def _on_a_full_disk(folder: Path, memory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`agent-gateway ARGS` in a mount namespace of its own, where `folder` is a 1 MB tmpfs
    holding a copy of the file `memory` and nothing more fits: a real full disk, gone with the
    process. Skipped where this process may not make one."""
    if shutil.which("unshare") is None:
        pytest.skip("no `unshare` to make a full disk with")
    folder.mkdir(exist_ok=True)
    fill = (
        'mount -t tmpfs -o size=1m tmpfs "$1" && cp "$2" "$1"/ || exit 99; '
        'head -c 2000000 /dev/zero > "$1"/filler 2>/dev/null; shift 2; exec "$@"'
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
