"""A span's time says how much of it a call under it waited (for a person's approval, for a
slot of its node) and how much it was busy: `waited_ms` and `busy_ms` beside `duration_ms`."""

from __future__ import annotations

import io
import re
import time

import anyio
import pytest

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.trace import TraceEvent, TracePrinter
from toolkits import FunctionToolkit, calculator, function_tool

pytestmark = pytest.mark.anyio


class Person:
    """Approves a call when the test says so; how long the call waited (ms)."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.decided = anyio.Event()
        self.waited_ms = 0.0

    async def decide(self, request: ApprovalRequest) -> Decision:
        began = time.perf_counter()
        self.asked.set()
        await self.decided.wait()
        self.waited_ms = (time.perf_counter() - began) * 1000
        return Decision(approved=True)


class Events:
    def __init__(self) -> None:
        self.ended: dict[tuple[str, str], TraceEvent] = {}

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase in ("end", "error"):
            self.ended[(event.kind, event.name)] = event


def calls(*expressions: str) -> ScriptedAnswer:
    return ScriptedAnswer(
        tool_calls=[
            ScriptedCall(name="calculator", arguments={"expression": e}) for e in expressions
        ]
    )


async def test_a_wait_for_approval_is_waited_time_of_the_agent_and_the_run_not_busy() -> None:
    model = ScriptedModel([calls("6 * 7"), "42"])
    spec = AgentSpec("a", model, ["calculator"], approval=ApprovalRule(["calculator"]))
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    events, person, lines = Events(), Person(), io.StringIO()
    hooks = [events, TracePrinter(lines)]
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: gateway.run("a", "go", hooks=hooks, approver=person))
            await person.asked.wait()
            await anyio.wait_all_tasks_blocked()  # the run waits on the person alone
            person.decided.set()

    for span in (("run", "a"), ("agent", "a")):
        ended = events.ended[span]
        assert ended.waited_ms is not None, span
        assert ended.busy_ms is not None
        assert ended.duration_ms is not None
        assert ended.waited_ms >= round(person.waited_ms, 1) - 0.1  # rounded to 0.1 ms
        assert ended.busy_ms == pytest.approx(ended.duration_ms - ended.waited_ms, abs=0.11)
    # The call ran after its wait: its own span waited for nothing, nor did its model's.
    assert events.ended[("tool", "calculator")].waited_ms is None
    assert events.ended[("tool", "calculator")].busy_ms is None
    model_span = next(e for (kind, _), e in events.ended.items() if kind == "model")
    assert model_span.waited_ms is None
    # The trace's lines say it on the run's and the agent's.
    waited = [line for line in lines.getvalue().splitlines() if "waited=" in line]
    assert [re.sub(r"\s+", " ", line).split(" waited=")[0].split("] ")[1] for line in waited] == [
        "agent a",
        "run a",
    ]


async def test_a_wait_for_a_slot_of_its_node_is_waited_time_too() -> None:
    began, release = anyio.Event(), anyio.Event()
    running: list[str] = []

    async def slow(text: str) -> str:
        """Hold the node's one slot till the test says so."""
        running.append(text)
        began.set()
        await release.wait()
        return text

    model = ScriptedModel(
        [
            ScriptedAnswer(
                tool_calls=[
                    ScriptedCall(name="slow", id="c1", arguments={"text": "one"}),
                    ScriptedCall(name="slow", id="c2", arguments={"text": "two"}),
                ]
            ),
            "done",
        ]
    )
    gateway = Gateway(
        [FunctionToolkit("slow", [function_tool(slow)])],
        [AgentSpec("a", model, ["slow"])],
        node_limits={"slow": 1},
    )
    events = Events()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: gateway.run("a", "go", hooks=[events]))
            await began.wait()
            await anyio.wait_all_tasks_blocked()  # the other call waits for the slot
            assert len(running) == 1
            release.set()
    agent = events.ended[("agent", "a")]
    assert agent.waited_ms is not None
    assert agent.busy_ms is not None
    assert agent.duration_ms is not None
    assert 0 < agent.waited_ms <= agent.duration_ms
    assert agent.busy_ms == pytest.approx(agent.duration_ms - agent.waited_ms, abs=0.11)
    assert events.ended[("run", "a")].waited_ms is not None
    # Waiting for the slot came before the call's span: the call itself waited for nothing.
    assert events.ended[("tool", "slow")].waited_ms is None
