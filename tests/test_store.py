"""The file run store: the latest state per run, written atomically, read back exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import AgentItem
from gateway import FileRunStore, UnknownRun
from gateway.engine import RunState

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
