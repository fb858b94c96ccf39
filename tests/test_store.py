"""The file run store: the latest state per run, written atomically, read back exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import AgentItem
from gateway import FileRunStore, GatewayError, UnknownRun
from gateway.run_state import RunState

pytestmark = pytest.mark.anyio


async def test_saves_replace_and_load_returns_the_latest(tmp_path: Path) -> None:
    store = FileRunStore(tmp_path / "runs")
    first = RunState(run_id="r1", agent="a", items=[AgentItem(prompt="q")])
    await store.save(first)
    later = first.model_copy(update={"items": [AgentItem(prompt="q", session_id="s")]})
    await store.save(later)
    assert await store.load("r1") == later
    assert [p.name for p in (tmp_path / "runs").iterdir()] == ["r1.json"]
    await store.delete("r1")
    with pytest.raises(UnknownRun, match="no stored run 'r1'"):
        await store.load("r1")


@pytest.mark.parametrize("run_id", ["../escape", "a/b", "", "x" * 200])
async def test_ids_that_are_not_plain_names_are_refused(tmp_path: Path, run_id: str) -> None:
    with pytest.raises(UnknownRun, match="not a run id"):
        await FileRunStore(tmp_path).load(run_id)


async def test_a_corrupt_state_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "r2.json").write_text('{"version": 1, "run_id": "r2"')
    with pytest.raises(UnknownRun, match="stored run 'r2' cannot be resumed"):
        await FileRunStore(tmp_path).load("r2")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00binary\x80", r"is not a run's state \(not UTF-8 text\)"),
        (None, "cannot read stored run .*: Is a directory"),
        (b'{"version": 9}', r"cannot be resumed: version: Input should be 1 \(and"),
    ],
)
async def test_unreadable_state_files_are_clear_errors(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    path = tmp_path / "r3.json"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(UnknownRun, match=message):
        await FileRunStore(tmp_path).load("r3")


async def test_a_state_filed_under_another_run_id_is_refused(tmp_path: Path) -> None:
    store = FileRunStore(tmp_path)
    await store.save(RunState(run_id="original", agent="a", items=[AgentItem(prompt="q")]))
    (tmp_path / "original.json").rename(tmp_path / "copy.json")
    with pytest.raises(UnknownRun, match="holds run 'original', not 'copy': refused"):
        await store.load("copy")


async def test_a_state_dir_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "runs").write_text("not a directory")
    state = RunState(run_id="r4", agent="a", items=[AgentItem(prompt="q")])
    with pytest.raises(GatewayError, match=r"cannot store run 'r4' in .*runs/r4\.json"):
        await FileRunStore(tmp_path / "runs").save(state)
