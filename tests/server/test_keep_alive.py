"""A served run keeps the client's progress clock going while a model or tool call is silent."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest
from mcp import Client

from agent import (
    AssistantMessage,
    ChatMessage,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    TokenCallback,
    ToolDefinition,
)
from gateway import AgentSpec
from toolkits import FunctionToolkit, function_tool

from .support import ERAS, calculator_gateway, serve

pytestmark = pytest.mark.anyio

INTERVAL = 0.05
BEATS = 3


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    return request.param


class Heartbeats:
    """Progress notifications; after `BEATS` heartbeats matching `word`, sets `enough`."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.messages: list[str] = []
        self.enough = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.messages.append(message or "")
        if sum(self.word in m for m in self.messages) >= BEATS:
            self.enough.set()


class HoldsAfterFirstWord(ScriptedModel):
    """Streams the first word of its answer, then holds until `release` is set."""

    def __init__(self, answers: Sequence[ScriptedAnswer | str], release: anyio.Event) -> None:
        super().__init__(answers, name="slow")
        self.release = release

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        async def held(delta: str) -> None:
            if on_token is not None:
                await on_token(delta)
            await self.release.wait()

        return await super().invoke(messages, tools, on_token=held)


async def test_a_long_model_call_sends_progress_every_interval_counting_its_streamed_text(
    era: str,
) -> None:
    beats = Heartbeats("model slow: writing, 7 chars")
    model = HoldsAfterFirstWord(["Hello, world."], beats.enough)
    gateway = calculator_gateway(AgentSpec("assistant", model))
    async with Client(serve(gateway, progress_interval=INTERVAL), mode=era) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("assistant", {"prompt": "hi"}, progress_callback=beats)
    assert not result.is_error
    assert sum("writing, 7 chars" in m for m in beats.messages) >= BEATS


async def test_a_silent_tool_call_sends_progress_every_interval(era: str) -> None:
    beats = Heartbeats("tool wait_for_it: still running")

    @function_tool
    async def wait_for_it() -> str:
        """Returns once the client has heard the heartbeat."""
        await beats.enough.wait()
        return "done"

    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="wait_for_it")]), "It is done."]
    )
    gateway = calculator_gateway(
        AgentSpec("assistant", model, tools=["waiting"]),
        nodes=[FunctionToolkit("waiting", [wait_for_it])],
    )
    async with Client(serve(gateway, progress_interval=INTERVAL), mode=era) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("assistant", {"prompt": "go"}, progress_callback=beats)
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["output"] == "It is done."


async def test_a_called_agents_silent_tool_call_is_named_by_its_agent(era: str) -> None:
    beats = Heartbeats("inner: tool wait_for_it: still running")

    @function_tool
    async def wait_for_it() -> str:
        """Returns once the client has heard the heartbeat."""
        await beats.enough.wait()
        return "done"

    inner = AgentSpec(
        "inner",
        ScriptedModel([ScriptedAnswer(tool_calls=[ScriptedCall(name="wait_for_it")]), "Done."]),
        tools=["waiting"],
    )
    outer_answers = [
        ScriptedAnswer(tool_calls=[ScriptedCall(name="inner", arguments={"prompt": "go"})])
    ]
    outer = AgentSpec("outer", ScriptedModel([*outer_answers, "Inner is done."]), tools=["inner"])
    gateway = calculator_gateway(outer, inner, nodes=[FunctionToolkit("waiting", [wait_for_it])])
    async with Client(serve(gateway, progress_interval=INTERVAL), mode=era) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("outer", {"prompt": "go"}, progress_callback=beats)
    assert result.content[0].model_dump()["text"] == "Inner is done."
    # The outer agent's call of the inner one is in flight too: the latest call is named.
    assert sum("inner: tool wait_for_it: still running" in m for m in beats.messages) >= BEATS
