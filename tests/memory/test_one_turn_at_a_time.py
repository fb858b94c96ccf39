"""Turns sent at once on one session take turns in a process: each model sees the turns
before it, and the stored conversation reads in order."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from agent import (
    AssistantMessage,
    ChatMessage,
    InProcessStore,
    ScriptedModel,
    SessionMemory,
    ToolDefinition,
)
from agent.memory.session_locks import SessionLocks
from agent.model import TokenCallback
from gateway import AgentSpec, Gateway
from gateway.trace import TraceEvent

pytestmark = pytest.mark.anyio


class HeldModel(ScriptedModel):
    """Its first answer waits for `release`; `entered` is set once that call is made."""

    def __init__(self, answers: Sequence[str]) -> None:
        super().__init__(answers)
        self.entered = anyio.Event()
        self.release = anyio.Event()

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        first = not self.entered.is_set()
        self.entered.set()
        if first:
            await self.release.wait()
        return await super().invoke(messages, tools, on_token=on_token)


async def test_a_second_turn_on_a_busy_session_waits_and_sees_the_first() -> None:
    memory = SessionMemory(InProcessStore())
    model = HeldModel(["a1", "a2", "a3"])
    gateway = Gateway([], [AgentSpec("a", model, memory=memory)])
    waiting = anyio.Event()
    outputs: dict[str, str | None] = {}

    async def noticed(event: TraceEvent) -> None:
        said = event.output if isinstance(event.output, dict) else {}
        if event.phase == "note" and "has a turn in progress" in str(said.get("warning")):
            waiting.set()

    async def turn(prompt: str) -> None:
        outputs[prompt] = (await gateway.run("a", prompt, session_id="s", hooks=[noticed])).output

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(turn, "q1")
            await model.entered.wait()
            tg.start_soon(turn, "q2")
            await waiting.wait()  # the second turn waits for the first: it has not loaded yet
            assert model.calls == []  # the first call is held; the second is not made
            model.release.set()
    assert outputs == {"q1": "a1", "q2": "a2"}
    second = [m.content for m in model.calls[1][0][1:]]
    assert second == ["q1", "a1", "q2"]  # it used to be ["q2"]: the first was not saved yet
    stored = await memory.store.turns("s")
    assert [t.messages[0].content for t in stored] == ["q1", "q2"]
    assert (await gateway.run("a", "q3", session_id="other")).output == "a3"


async def test_session_locks_go_when_unused_and_a_holder_may_hold_again() -> None:
    locks = SessionLocks()
    store = object()
    with anyio.fail_after(5):
        async with locks.holding([(store, "s"), (store, "t")]):
            assert len(locks) == 2
            async with locks.holding([(store, "s")]):  # a run inside the run: no wait
                assert len(locks) == 2
        assert len(locks) == 0

    waited: list[str] = []
    held, release, asked = anyio.Event(), anyio.Event(), anyio.Event()
    given_up = anyio.CancelScope()

    async def on_wait(session_id: str) -> None:
        waited.append(session_id)
        asked.set()

    async def holder() -> None:
        async with locks.holding([(store, "s")]):
            held.set()
            await release.wait()

    async def waiter() -> None:
        with given_up:
            async with locks.holding([(store, "s")], on_wait):
                raise AssertionError("it was given up before the holder let go")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(holder)
            await held.wait()
            tg.start_soon(waiter)
            await asked.wait()
            assert len(locks) == 1
            given_up.cancel()  # a waiter given up on leaves nothing behind
            release.set()
    assert waited == ["s"]
    assert len(locks) == 0
