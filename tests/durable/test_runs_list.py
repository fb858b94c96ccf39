"""`runs list` as text: each run's id, status, when it last changed (UTC, as `sessions list`
says it), its agent, the calls it waits on, and why it stopped."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from agent import AgentError, AgentItem, ScriptedModel
from gateway import AgentSpec, Gateway, RunState
from gateway.durable import open_runs

from .cli_runs import cli, list_runs, script_model, start_run, stop_run, tool_call
from .many_runs import cloned

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CONFIG = (
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
    '[agents.assistant]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
)


async def test_a_waiting_run_is_listed_with_its_time_and_the_calls_it_waits_on(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = str(tmp_path / "calls.log")
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    both = [
        tool_call("guarded", "g1", log=log, name="G"),
        tool_call("guarded", "g2", log=log, name="H"),
    ]
    model = script_model(tmp_path / "s.json", {"tool_calls": both}, {"content": "done"})
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded", count=2)
        listed = cli("runs", "list", "--store", store)
        [waiting] = list_runs(store)
    finally:
        await stop_run(run)
    assert listed.returncode == 0, listed.stderr
    when = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"
    line = rf"{waiting['run_id']}  waiting_approval {when}  assistant  waiting on g1, g2\n"
    assert re.fullmatch(line, listed.stdout), listed.stdout
    assert isinstance(waiting["updated_ms"], int)


async def test_a_run_that_goes_on_is_listed_with_when_it_last_changed(
    tmp_path: Path, store: str
) -> None:
    """Its approval and the calls after it change the run, though its status (as DBOS
    keeps it) stays the same: the time listed is the last change, not when it began."""
    log = str(tmp_path / "calls.log")
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    model = script_model(
        tmp_path / "s.json",
        {"tool_calls": [tool_call("guarded", "g1", log=log, name="G")]},
        {"tool_calls": [tool_call("guarded", "g2", log=log, name="H")]},
        {"content": "done"},
    )
    run = await start_run("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded")
        [first] = list_runs(store)
        assert first["updated_ms"] >= first["created_ms"]
        approving_ms = time.time() * 1000
        approved = cli("runs", "approve", first["run_id"], "g1", "--store", store)
        assert approved.returncode == 0, approved.stderr
        await run.until("waiting for approval: guarded", count=2)  # the next call's
        [later] = list_runs(store)
    finally:
        await stop_run(run)
    assert [w["short"] for w in later["waiting"]] == ["g2"]
    assert later["created_ms"] == first["created_ms"]
    assert later["updated_ms"] >= approving_ms > first["created_ms"]


async def test_the_newest_runs_are_listed_and_a_status_is_looked_for_by_the_store(
    tmp_path: Path,
) -> None:
    """`runs list` shows the newest 100 by default, saying there are more (`--limit`); a
    status with a limit gives that many runs of the status, not those of the newest runs
    that have it (was: `list("stopped", limit=2)` of a store whose newest runs succeeded: none)."""
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    async with open_runs(store) as runs:
        runs.use(Gateway([], [AgentSpec("assistant", ScriptedModel([]))]))
        stopped: list[str] = []
        for n in range(3):  # first: their model has no answer for them
            state = RunState(run_id=f"stopped{n}", agent="assistant", items=[AgentItem(prompt="x")])
            stopped.append(state.run_id)
            with pytest.raises(AgentError):
                await runs.start(state)
        runs.use(Gateway([], [AgentSpec("assistant", ScriptedModel(["hi"] * 101))]))
        for n in range(101):  # then newer ones, that succeed
            await runs.start(
                RunState(run_id=f"ok{n:03}", agent="assistant", items=[AgentItem(prompt="q")])
            )
        found = await runs.list("stopped", limit=2)
        assert [info.run_id for info in found] == stopped[::-1][:2]
        assert [i.status for i in await runs.list("succeeded", limit=3)] == ["succeeded"] * 3
        assert len(await runs.list()) == 104

    listed = cli("runs", "list", "--store", store)
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 100
    assert listed.stdout.splitlines()[0].startswith("ok100  succeeded")
    more = "the newest 100 runs; there are more: --limit N shows N, --limit 0 all\n"
    assert listed.stderr == more
    every = cli("runs", "list", "--store", store, "--limit", "0", "--json")
    assert (every.returncode, every.stderr) == (0, ""), every.stderr
    assert len(json.loads(every.stdout)) == 104
    some = cli("runs", "list", "--store", store, "--status", "stopped", "--limit", "2")
    assert [line.split()[0] for line in some.stdout.splitlines()] == ["stopped2", "stopped1"]
    assert some.stderr.startswith("the newest 2 stopped runs; there are more")
    wrong = cli("runs", "list", "--store", store, "--limit", "-1")
    assert wrong.returncode == 2
    assert "not a number of runs (0 or more): '-1'" in wrong.stderr


async def test_the_runs_not_ended_are_read_a_page_at_a_time_not_one_by_one(
    tmp_path: Path, store: str
) -> None:
    """Which of them are running, waiting or stopped is in their events: those of a page of
    runs are read at once, over one connection of ours, and the input of the runs listed
    only. Was: two event reads through DBOS and the decisions of every run not ended (a new
    connection each on PostgreSQL): 12-28 s to find none running among 4,000."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(CONFIG)
    log = str(tmp_path / "calls.log")
    model = script_model(
        tmp_path / "s.json", {"tool_calls": [tool_call("guarded", "g1", log=log, name="G")]}
    )
    waiting, stopped = (
        json.loads(done.stdout)["run_id"]
        for done in (
            cli(
                *("run", "go", "--config", str(config), "--store", store),
                "--no-wait",
                "--json",
                "--model",
                model,
            ),
            # Its model has no answer: it stops.
            cli("run", "go", "--store", store, "--json", "--model", script_model(tmp_path / "n")),
        )
    )
    stopped_ids = {stopped, *cloned(store, stopped, 600, prefix="s-")}
    waits = {waiting, *cloned(store, waiting, 300, prefix="w-")}  # 902 not ended: two pages

    statements: list[str] = []

    def seen(*args: Any) -> None:
        if str(args[2]).startswith("SELECT"):  # what DBOS reads (not PostgreSQL's SETs)
            statements.append(str(args[2]))

    async with open_runs(store, launch=False, read_only=True) as runs:
        event.listen(Engine, "before_cursor_execute", seen)
        try:
            assert await runs.list("running") == []
            assert len(statements) == 1  # the list of runs not ended: not their events
            statements.clear()
            some = await runs.list("waiting_approval", limit=3)
            assert len(statements) == 2  # and the inputs of the three
            assert [(i.status, i.agent) for i in some] == [("waiting_approval", "assistant")] * 3
            assert all([r.short for r in i.waiting] == ["g1"] for i in some)
            assert all(i.updated_ms is not None for i in some)
            assert {i.run_id for i in await runs.list("waiting_approval")} == waits
            statements.clear()
            assert {i.run_id for i in await runs.list("stopped")} == stopped_ids
            assert len(statements) <= 4  # the list, and inputs a page (500) at a time
            assert {i.run_id for i in await runs.list()} == stopped_ids | waits
        finally:
            event.remove(Engine, "before_cursor_execute", seen)
