"""A run cancelled from another process (`cancel_run` on another gateway) just as it records a
step here is told as cancelled, not as "interrupted: it is stored, resumable": DBOS drops a
cancelled run's owner, and the step's write here fails as if another process had taken it."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from dbos import DBOSClient

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.durable import open_runs
from gateway.errors import RunCancelled
from gateway.run_state import RunState
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_run_cancelled_elsewhere_as_it_records_a_step_is_cancelled(
    tmp_path: Path, store: str
) -> None:
    holding, release = anyio.Event(), anyio.Event()

    async def hold(text: str) -> str:
        """Hold a text until the test releases it."""
        holding.set()
        await release.wait()
        return text

    model = ScriptedModel(
        [
            ScriptedAnswer(tool_calls=[ScriptedCall(name="hold", id="a", arguments={"text": "A"})]),
            "not reached",
        ]
    )
    gateway = Gateway(
        [FunctionToolkit("held", [function_tool(hold)])],
        [AgentSpec("assistant", model, tools=["held"])],
    )
    state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
    async with open_runs(store) as runs:
        runs.use(gateway)
        await runs.begin(state)
        with anyio.fail_after(30):
            await holding.wait()
            # Another gateway cancels it; the call returns at once, and its record is written
            # before this process's cancel watch (every 0.5 s) looks.
            elsewhere = DBOSClient(system_database_url=store)
            try:
                await anyio.to_thread.run_sync(elsewhere.cancel_workflow, state.run_id)
            finally:
                elsewhere.destroy()
            release.set()
            with pytest.raises(RunCancelled, match="was cancelled"):  # was: "interrupted: ..."
                await runs.follow(state.run_id)
        assert (await runs.get(state.run_id)).status == "cancelled"
