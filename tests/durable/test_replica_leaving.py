"""A replica told to go leaves its runs in flight for another: its `execution` event says
nothing stopped them (a replica takes them over), not "interrupted". With the runs in this
process, on a real PostgreSQL."""

from __future__ import annotations

import uuid

import anyio
import pytest
from dbos import DBOSClient

from agent import AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.durable import open_runs
from gateway.durable.status import EXECUTION_EVENT
from gateway.run_state import RunState
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_run_left_by_a_replica_going_is_in_flight_not_stopped(
    postgres_url: str,
) -> None:
    store = f"{postgres_url.rsplit('/', 1)[0]}/leaving_{uuid.uuid4().hex[:12]}"
    holding = anyio.Event()

    async def hold(text: str) -> str:
        """Hold a text, for ever."""
        holding.set()
        await anyio.Event().wait()
        return text

    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="hold", id="a", arguments={"text": "A"})])]
    )
    gateway = Gateway(
        [FunctionToolkit("held", [function_tool(hold)])],
        [AgentSpec("assistant", model, tools=["held"])],
    )
    state = RunState(run_id=new_id(), agent="assistant", items=[AgentItem(prompt="go")])
    async with open_runs(store, replica_every=3600) as runs:  # a replica (that takes nothing)
        runs.use(gateway)
        await runs.begin(state)
        with anyio.fail_after(20):
            await holding.wait()
        runs.hand_over()  # SIGTERM: on exit its runs are left to another replica
    # Its lock is gone now, and this process, which ran it, lives on.

    # (DBOS, destroyed, shut the loop's default executor: its `_async` calls would fail.)
    went = await anyio.to_thread.run_sync(_execution_event, store, state.run_id)
    assert isinstance(went, dict), went
    assert went["stopped"] is None  # in flight: `replicas` takes it over
    assert went["left"] is True  # handed over: its taker says it left, not died


def _execution_event(store: str, run_id: str) -> object:
    client = DBOSClient(system_database_url=store)
    try:
        return client.get_event(run_id, EXECUTION_EVENT, timeout_seconds=0)
    finally:
        client.destroy()
