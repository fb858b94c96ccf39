"""A run interrupted as it starts (Ctrl-C, a signal, a client's cancel) is in the store, as
the command that started it says ("interrupted: run X is stored: agent-gateway resume X"):
DBOS awaits before it writes the run, and a cancel there lost it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from agent import AgentItem, ScriptedModel
from gateway import AgentSpec, Gateway, RunState
from gateway.durable import open_runs

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("background", [False, True])
async def test_a_run_interrupted_as_it_starts_is_stored(tmp_path: Path, background: bool) -> None:
    gateway = Gateway([], [AgentSpec("assistant", ScriptedModel(["Hello."]))])
    state = RunState(run_id="interrupted1", agent="assistant", items=[AgentItem(prompt="hi")])
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        with anyio.CancelScope() as scope:
            scope.cancel()  # the interruption came as the run began
            await (runs.begin(state) if background else runs.start(state))
        info = await runs.get(state.run_id)  # was: UnknownRun, no stored run
        assert info.run_id == "interrupted1"
        assert info.agent == "assistant"
