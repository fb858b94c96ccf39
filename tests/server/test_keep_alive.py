"""A served run keeps the client's progress clock going while a model or tool call is silent,
while a call waits for a person's approval, and while it waits on what sends no event."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import Server
from mcp.server.context import ServerRequestContext

from agent import (
    AssistantMessage,
    ChatMessage,
    InProcessStore,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
    TokenCallback,
    ToolDefinition,
)
from gateway import AgentSpec, TraceEvent
from gateway.approval import ApprovalRule
from gateway.server import McpNotifier
from gateway.trace import Kind, OpenSpan
from toolkits import FunctionToolkit, function_tool, in_background

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


async def test_a_call_waiting_for_approval_sends_progress_every_interval_saying_so() -> None:
    """A 2025-11-25 client is shown the form during the call; its person takes their time."""
    beats = Heartbeats("tool note: waiting for a person's approval")
    noted: list[str] = []

    @function_tool
    def note(text: str) -> str:
        """Note a text."""
        noted.append(text)
        return "noted"

    async def person(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        await beats.enough.wait()  # thinking it over
        return types.ElicitResult(action="accept", content={"approve": True})

    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="note", arguments={"text": "A"})]), "Noted."]
    )
    spec = AgentSpec("assistant", model, tools=["notes"], approval=ApprovalRule(["note"]))
    gateway = calculator_gateway(spec, nodes=[FunctionToolkit("notes", [note])])
    async with Client(
        serve(gateway, progress_interval=INTERVAL), mode="legacy", elicitation_callback=person
    ) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("assistant", {"prompt": "go"}, progress_callback=beats)
    assert result.content == [types.TextContent(text="Noted.")]
    assert noted == ["A"]
    assert sum("waiting for a person's approval" in m for m in beats.messages) >= BEATS


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_waiting_on_what_sends_no_event_sends_progress_saying_what_it_last_did(
    era: str,
) -> None:
    """A served stored run's follower may wait on the store, which sends no event."""
    beats = Heartbeats("still working, nothing new for")

    async def quiet_call(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        notifier = McpNotifier(ctx, heartbeat=INTERVAL)
        async with in_background(notifier.keep_alive, wait_started=False):
            await beats.enough.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async def tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="quiet", input_schema={"type": "object"})]
        )

    server = Server[Any]("quiet", on_call_tool=quiet_call, on_list_tools=tools)
    async with Client(server, mode=era) as client:
        with anyio.fail_after(20):
            result = await client.call_tool("quiet", {}, progress_callback=beats)
    assert result.content == [types.TextContent(text="done")]
    assert beats.messages[0].startswith("still working, nothing new for 0 s (the call began)")


async def test_a_run_followed_midway_names_the_call_under_way_timed_from_its_start() -> None:
    """A stored run's follower (a round's retry, `approve_run`) is told of the spans open
    when it began to follow: what runs inside a sub-agent, for how long already."""
    beats = Heartbeats("still running")
    now = time.monotonic()

    def started(kind: Kind, name: str, id: str, parent: str | None, ago: float) -> OpenSpan:
        event = TraceEvent(
            kind=kind, phase="start", name=name, id=id, parent_id=parent, run_id="r1", at_ms=0
        )
        return OpenSpan(event, now - ago)

    open_spans = [
        started("run", "lead", "r", None, 300),
        started("agent", "lead", "a1", "r", 300),
        started("tool", "mid", "t1", "a1", 299),
        started("agent", "mid", "a2", "t1", 299),
        started("tool", "leaf", "t2", "a2", 298),
        started("agent", "leaf", "a3", "t2", 298),
        started("tool", "slow", "t3", "a3", 120),
    ]

    async def following(
        ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        notifier = McpNotifier(ctx, heartbeat=INTERVAL)
        notifier.joined(open_spans)
        async with in_background(notifier.keep_alive, wait_started=False):
            await beats.enough.wait()
        return types.CallToolResult(content=[types.TextContent(text="done")])

    async def tools(
        ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="follow", input_schema={"type": "object"})]
        )

    server = Server[Any]("following", on_call_tool=following, on_list_tools=tools)
    async with Client(server, mode="legacy") as client:
        with anyio.fail_after(20):
            await client.call_tool("follow", {}, progress_callback=beats)
    # Not told again as begun: only the heartbeats.
    assert beats.messages[0] == "mid > leaf: tool slow: still running (120 s)"


async def test_a_call_waiting_for_its_sessions_turn_in_progress_sends_progress_saying_so() -> None:
    """The second call on a busy session was kept alive with `still working, nothing new for
    15 s (agent assistant: started ...)`: not that it waited for the session's other turn."""
    beats = Heartbeats("waiting for the turn in progress on session 's'")
    answering = anyio.Event()

    class SaysWhenAsked(HoldsAfterFirstWord):
        async def invoke(
            self,
            messages: Sequence[ChatMessage],
            tools: Sequence[ToolDefinition],
            *,
            on_token: TokenCallback | None = None,
        ) -> AssistantMessage:
            answering.set()  # the first call holds the session: its history is loaded
            return await super().invoke(messages, tools, on_token=on_token)

    model = SaysWhenAsked(["First.", "Second."], beats.enough)
    spec = AgentSpec("assistant", model, memory=SessionMemory(InProcessStore()))
    gateway = calculator_gateway(spec)
    outputs: list[object] = []
    async with Client(serve(gateway, progress_interval=INTERVAL), mode="legacy") as client:

        async def ask(prompt: str, progress: Heartbeats | None) -> None:
            arguments = {"prompt": prompt, "session_id": "s"}
            result = await client.call_tool("assistant", arguments, progress_callback=progress)
            assert result.structured_content is not None
            outputs.append(result.structured_content["output"])

        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(ask, "one", None)
                await answering.wait()
                await ask("two", beats)  # the first is held until these heartbeats say it
    assert outputs == ["First.", "Second."]
    said = [m for m in beats.messages if "turn in progress" in m]
    assert said[0] == "agent assistant: waiting for the turn in progress on session 's'"
    assert said[1].startswith("still working, nothing new for 0 s (agent assistant: waiting")
