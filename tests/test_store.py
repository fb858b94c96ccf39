"""The file run store: the latest state per run, written atomically, read back exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent import AgentItem
from gateway import FileRunStore, StoreUnavailable, UnknownRun
from gateway.errors import UnreadableRun
from gateway.run_state import RunState, stored_result, stored_state

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
    """A store that cannot write is the documented `StoreError` (`StoreUnavailable`), not a
    bare `GatewayError` that code catching store failures would miss."""
    (tmp_path / "runs").write_text("not a directory")
    state = RunState(run_id="r4", agent="a", items=[AgentItem(prompt="q")])
    with pytest.raises(StoreUnavailable, match=r"cannot store run 'r4' in .*runs/r4\.json"):
        await FileRunStore(tmp_path / "runs").save(state)


async def test_a_state_file_that_cannot_be_deleted_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "r5.json").mkdir()  # no file to unlink: a directory of its name
    with pytest.raises(StoreUnavailable, match=r"cannot delete stored run .*r5\.json"):
        await FileRunStore(tmp_path).delete("r5")
    await FileRunStore(tmp_path).delete("never-stored")  # nothing to delete: nothing said


def test_a_stored_result_or_state_no_reader_takes_is_one_line() -> None:
    """A run stored as succeeded with a call's arguments 200-490 levels deep (before those
    were refused) could never be shown: `RunResult`'s reader stops at 200 levels, and its
    error was a traceback, with a key path as long as the nesting."""
    deep = "[" * 300 + "]" * 300
    result = '{"run_id": "r4", "agent": "a", "items": [{"output": ' + deep + "}]}"
    with pytest.raises(UnreadableRun) as caught:
        stored_result(result, "r4")
    assert str(caught.value).startswith(
        "the result of stored run 'r4' cannot be read: Invalid JSON: recursion limit exceeded"
    )
    state: dict[str, object] = {"run_id": "r4", "agent": "a", "items": [], "version": 9}
    for _ in range(60):  # agents called by agents: an error's path is `children.c1.` each
        state = {
            "run_id": "r4",
            "agent": "a",
            "items": [{"prompt": "q"}],
            "children": {"c1": state},
        }
    with pytest.raises(UnreadableRun) as caught:
        stored_state(json.dumps(state), "r4")
    said = str(caught.value)
    assert said.startswith("stored run 'r4' cannot be resumed: children.c1.children.c1.")
    assert said.endswith(".children.c1.version: Input should be 1")
    assert len(said) < 250  # the path cut short: 60 levels of `children.c1.`
