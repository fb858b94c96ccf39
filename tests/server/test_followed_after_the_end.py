"""A run followed just after it ended in this process's background (a client's `tasks/result`
or `approve_run` that looked while it still ran): the follower gets its end, not the
operator's words on resuming it (which name the store)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent import AgentItem, ScriptedModel
from gateway import AgentSpec, Gateway, RunState
from gateway.durable import open_runs
from gateway.server.served.stored_runs import StoredAgentRuns

pytestmark = pytest.mark.anyio


async def _nobody(_: object) -> None:
    return None


async def test_a_run_that_ended_meanwhile_gives_its_result(tmp_path: Path) -> None:
    gateway = Gateway([], [AgentSpec("assistant", ScriptedModel(["done"]))])
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        stored = StoredAgentRuns(runs)
        state = RunState(run_id="ended1", agent="assistant", items=[AgentItem(prompt="go")])
        await runs.begin(state)
        await runs.follow(state.run_id)  # it ends; its execution leaves this process
        outcome = await stored.follow(state.run_id, _nobody)  # was: UnknownRun, "has ended"
    assert not isinstance(outcome, list)
    assert outcome.output == "done"
