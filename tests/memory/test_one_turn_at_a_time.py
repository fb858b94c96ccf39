"""Turns sent at once on one session take turns in a process: each model sees the turns
before it, and the stored conversation reads in order."""

from __future__ import annotations

import uuid
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
from agent.memory.redis_store import RedisStore
from agent.memory.session_locks import SessionLocks
from agent.model import TokenCallback
from gateway import AgentSpec, Gateway
from gateway.trace import TraceEvent
from tests.servers.databases import RedisServer

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


async def test_one_redis_by_its_socket_and_by_tcp_holds_a_session_as_one(
    redis_instance: RedisServer,
) -> None:
    """Two agents keep memory in one Redis, one by its Unix socket and one by TCP: no URL
    says they are one server, so each had its own session locks, and turns of both on one
    session went at once, the second missing the first. The server says which data it keeps
    (its run id, the database, the prefix): the second turn waits and sees the first.
    Another database or prefix of that server is another store."""
    prefix = f"test-{uuid.uuid4().hex}"
    by_tcp = RedisStore(redis_instance.url, prefix=prefix)
    by_socket = RedisStore(redis_instance.socket_url, prefix=prefix)
    others = [
        RedisStore(redis_instance.url.removesuffix("/0") + "/1", prefix=prefix),
        RedisStore(redis_instance.socket_url, prefix=f"{prefix}-other"),
    ]
    held = HeldModel(["a1"])
    later = ScriptedModel(["b1"])
    agents = [
        AgentSpec("a", held, memory=SessionMemory(by_tcp)),
        AgentSpec("b", later, memory=SessionMemory(by_socket)),
    ]
    gateway = Gateway([], agents)
    waiting = anyio.Event()

    async def noticed(event: TraceEvent) -> None:
        said = event.output if isinstance(event.output, dict) else {}
        if event.phase == "note" and "has a turn in progress" in str(said.get("warning")):
            waiting.set()

    async def turn(agent: str, prompt: str) -> None:
        await gateway.run(agent, prompt, session_id="s", hooks=[noticed])

    try:
        with anyio.fail_after(20):
            identities = [await store.identity() for store in (by_tcp, by_socket, *others)]
            assert identities[0] == identities[1]
            assert len(set(identities[1:])) == 3
            async with anyio.create_task_group() as tg:
                tg.start_soon(turn, "a", "q1")
                await held.entered.wait()
                tg.start_soon(turn, "b", "q2")
                await waiting.wait()  # b's turn waits for a's: it has not loaded yet
                assert later.calls == []
                held.release.set()
        assert [m.content for m in later.calls[0][0][1:]] == ["q1", "a1", "q2"]
        assert [t.messages[0].content for t in await by_socket.turns("s")] == ["q1", "q2"]
    finally:
        await by_tcp.delete("s")
        for store in (by_tcp, by_socket, *others):
            await store.aclose()


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
