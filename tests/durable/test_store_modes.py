"""A store holds every prompt, answer and tool result: the directory the gateway makes for
it is its owner's alone (0700), the SQLite file and its -wal and -shm files too (0600),
whatever the umask; a store that is open to others already is left so, with a warning."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent import AssistantMessage, UserMessage
from agent.memory import SQLiteStore
from gateway.cli import main
from gateway.durable import open_runs


@pytest.fixture(autouse=True)
def loose_umask() -> Iterator[None]:
    """The usual umask, which leaves new files readable by every user."""
    before = os.umask(0o022)
    yield
    os.umask(before)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def _config(directory: Path) -> Path:
    script = directory / "answers.json"
    script.write_text(json.dumps([{"content": "It is 42."}] * 2))
    config = directory / "agent-gateway.toml"
    config.write_text(f'[agents.assistant]\nmodel = "scripted:{script}"\n')
    return config


def test_a_fresh_data_directory_and_state_directory_are_the_owners_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "home" / "data"
    monkeypatch.setenv("AGENT_GATEWAY_DATA_DIR", str(data))
    config = _config(tmp_path)
    assert main(["run", "q", "--config", str(config), "--session", "s1"]) == 0
    assert (mode(data), mode(data / "agent-gateway.sqlite3")) == (0o700, 0o600)
    state = tmp_path / "st"
    assert main(["run", "q", "--config", str(config), "--state-dir", str(state)]) == 0
    assert (mode(state), mode(state / "agent-gateway.sqlite3")) == (0o700, 0o600)
    assert warnings(caplog) == []  # nothing to warn about


@pytest.mark.anyio
async def test_the_write_ahead_log_files_are_private_too(tmp_path: Path) -> None:
    runs_file, memory_file = tmp_path / "r" / "runs.sqlite3", tmp_path / "m" / "memory.sqlite3"
    async with open_runs(f"sqlite:///{runs_file}"):
        files = [Path(f"{runs_file}{suffix}") for suffix in ("", "-wal", "-shm")]
        assert [mode(file) for file in files] == [0o600] * 3
    memory = SQLiteStore(memory_file)
    try:
        turn = [UserMessage(content="q"), AssistantMessage(content="a")]
        assert await memory.append("s", "k", turn, [1, 1])
        files = [Path(f"{memory_file}{suffix}") for suffix in ("", "-wal", "-shm")]
        assert [mode(file) for file in files] == [0o600] * 3
    finally:
        await memory.aclose()
    assert (mode(runs_file.parent), mode(memory_file.parent)) == (0o700, 0o700)


def test_a_store_open_to_others_is_left_so_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config, state = _config(tmp_path), tmp_path / "shared"
    state.mkdir(mode=0o750)
    file = state / "agent-gateway.sqlite3"
    file.touch(mode=0o640)  # shared with a group on purpose, say
    assert (
        main(["run", "q", "--config", str(config), "--state-dir", str(state), "--session", "s"])
        == 0
    )
    assert warnings(caplog) == [  # the run store's, not again for chat memory in it
        f"the run store {file} is open to other users (agent-gateway.sqlite3 mode 0640): "
        f"chmod 600 {file}"
    ]
    assert (mode(state), mode(file)) == (0o750, 0o640)
