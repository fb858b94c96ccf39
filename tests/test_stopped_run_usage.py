"""What a stored run that stopped had spent (`spent`, what `run --json` and `runs show` say):
every model call made by then, a sub-agent's that ended in the step the run stopped in too;
and its last checkpoint is its latest state, though the step's calls save side by side."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import pytest
from pydantic import JsonValue

from agent import (
    Action,
    ActionResponse,
    AgentItem,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    ToolMessage,
    Usage,
)
from gateway import AgentSpec, Gateway, RunState, TraceEvent
from gateway.run_state import RunSaver, spent

pytestmark = pytest.mark.anyio


class Journal:
    """Records each call's result by name, as a stored run's journal does."""

    def __init__(self) -> None:
        self.records: dict[str, JsonValue] = {}

    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        del nested
        if name not in self.records:
            self.records[name] = await call()
        return self.records[name]


def team(top: ScriptedModel, math: ScriptedModel, broken: ScriptedModel, **budget: int) -> Gateway:
    return Gateway(
        [],
        [
            AgentSpec("top", top, tools=["math", "broken"], **budget),  # pyright: ignore[reportArgumentType]
            AgentSpec("math", math, description="Does sums."),
            AgentSpec("broken", broken, description="Has no answer."),
        ],
    )


BOTH = ScriptedAnswer(
    tool_calls=[
        ScriptedCall(name="math", arguments={"prompt": "6 * 7?"}),
        ScriptedCall(name="broken", arguments={"prompt": "anything"}),
    ]
)


async def stopped_run() -> tuple[RunState, Usage, Journal]:
    """`top` asks `math` (which answers) and `broken` (which has no answer: the run stops)
    in one step: its last state, what its model calls cost, and its journal."""
    billed = Usage()

    async def bill(event: TraceEvent) -> None:
        nonlocal billed
        if event.kind == "model" and event.phase == "end" and isinstance(event.output, dict):
            billed += Usage.model_validate(event.output["usage"])

    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(state)

    math = ScriptedModel(["It is 42, as six times seven makes."])
    gateway = team(ScriptedModel([BOTH]), math, ScriptedModel([]))
    journal = Journal()
    start = RunState(run_id="r1", agent="top", items=[AgentItem(prompt="go")])
    with anyio.fail_after(10), pytest.raises(ScriptExhausted):
        await gateway.resume(start, checkpoint=keep, journal=journal, hooks=[bill])
    assert len(math.calls) == 1  # it answered before the run stopped
    return stored[-1], billed, journal


async def test_a_stopped_run_counts_a_sub_agent_that_ended_in_the_step_it_stopped_in() -> None:
    state, billed, _journal = await stopped_run()
    assert billed.requests == 2  # top's call and math's
    assert spent(state) == billed
    assert state.request is not None  # the step is still to finish, broken's call with it
    assert list(state.children) == ["call_2"]  # broken's, where it resumes


async def test_a_resumed_runs_budget_counts_the_sub_agent_that_ended_before_it_stopped() -> None:
    state, billed, journal = await stopped_run()
    models = [ScriptedModel(["never asked"]) for _ in range(3)]
    spent_up = team(*models, token_budget=billed.total_tokens)
    with anyio.fail_after(10):
        result = await spent_up.resume(state, journal=journal)
    assert (result.error or "").startswith("Token budget (")
    assert [len(m.calls) for m in models] == [0, 0, 0]
    assert result.usage == billed


async def test_saves_side_by_side_leave_the_latest_state_as_the_last_written() -> None:
    """A store may finish two writes in another order than they began (DBOS writes in
    threads): the later state must not be overwritten by the earlier one."""
    begun: list[RunState] = []
    written: list[RunState] = []

    async def checkpoint(state: RunState) -> None:
        begun.append(state)
        if len(begun) == 1:  # the first write is slow: it ends once the other is under way
            await anyio.wait_all_tasks_blocked()
        written.append(state)

    start = RunState(run_id="r1", agent="top", items=[AgentItem(prompt="go")])
    saver = RunSaver(start, checkpoint)
    one, two = Usage(requests=1), Usage(requests=2)
    ended = {call: _response(call, usage) for call, usage in (("call_1", one), ("call_2", two))}
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for call, response in ended.items():
                tg.start_soon(saver.ended, call, response)
    assert written[-1].finished == {"call_1": one, "call_2": two}
    assert written[-1].answered == ended  # no journal records them: the state keeps them


def _response(call_id: str, usage: Usage) -> ActionResponse:
    action = Action(node="helper", input={}, tool_call_id=call_id, item_index=0, tool="helper")
    return ActionResponse(action=action, data={"response": "ok"}, usage=usage)


async def test_a_run_resumed_without_the_sub_agent_it_stopped_in_keeps_what_that_spent() -> None:
    """`broken` had made a model call when the run stopped inside it; resumed on a gateway
    without `broken` (`resume --force` on a changed config), its call is answered with why,
    and its model call stays counted."""
    billed = Usage()

    async def bill(event: TraceEvent) -> None:
        nonlocal billed
        if event.kind == "model" and event.phase == "end" and isinstance(event.output, dict):
            billed += Usage.model_validate(event.output["usage"])

    stored: list[RunState] = []

    async def keep(state: RunState) -> None:
        stored.append(state)

    broken = ScriptedModel([ScriptedAnswer(tool_calls=[ScriptedCall(name="nothing")])])
    gateway = team(ScriptedModel([BOTH]), ScriptedModel(["42"]), broken)
    journal = Journal()
    start = RunState(run_id="r1", agent="top", items=[AgentItem(prompt="go")])
    with anyio.fail_after(10), pytest.raises(ScriptExhausted):
        await gateway.resume(start, checkpoint=keep, journal=journal, hooks=[bill])
    assert billed.requests == 3  # top's, math's and broken's first
    top = ScriptedModel(["done"])
    without = Gateway([], [AgentSpec("top", top, tools=["math"]), AgentSpec("math", top)])
    with anyio.fail_after(10):
        result = await without.resume(stored[-1], journal=journal, hooks=[bill])
    assert result.output == "done"
    assert result.usage == billed  # was less: broken's call vanished
    told = [m.content for m in top.calls[0][0] if isinstance(m, ToolMessage)]
    assert told[1] == (
        "Error: agent 'broken', which this call ran when the run stopped, is not in this "
        "gateway now: the call did not finish"
    )
