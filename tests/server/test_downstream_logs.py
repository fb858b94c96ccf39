"""A node's server logs during a call: the proxied call's client hears it, an agent run notes it.

Every pairing of eras: our client on 2025-11-25 (every level until it sets one with
`logging/setLevel`, then what it set) or 2026-07-28 (what it opted in to; the proxied call is parked, and the message goes to the round waiting), and the node's
server on either (the message in the call's own context, or on a connection that does not say
which call it belongs to).
"""

from __future__ import annotations

import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning

from agent import ScriptedModel
from gateway import AgentSpec, Gateway, TraceEvent
from tests.servers.inprocess import Context, CrashableTransport, ToyServer, text_result
from toolkits import CallContext
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

from .proxying import set_log_level
from .support import ERAS, call, serve

pytestmark = pytest.mark.anyio

DOWNSTREAM: list[ProtocolMode] = ["legacy", "modern"]
WARNING = ("warning", "chatty", {"disk": "low", "free_gb": 3})
DEBUG = ("debug", "chatty", "details nobody asked for")


def chatty_node(down: ProtocolMode) -> McpToolkit:
    """A node whose `chatty` tool logs a debug and a warning message during the call."""
    toy = ToyServer("toy", logging=True)

    async def chatty(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        for level, logger, data in (DEBUG, WARNING):
            # The 2026-07-28 deprecation of logging is not ours to act on here.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(  # pyright: ignore[reportDeprecated]
                    level, data, logger, related_request_id=ctx.request_id
                )
        return text_result("done")

    toy.add("chatty", chatty)
    config = McpServerConfig(command="in-process", protocol=down)
    return McpToolkit("toy", config, target=toy.server)


class Inbox:
    """An upstream client's `logging_callback`: what it heard."""

    def __init__(self) -> None:
        self.messages: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.messages.append(params)

    def heard(self, logger: str = "chatty") -> list[tuple[str, str | None, Any]]:
        return [(m.level, m.logger, m.data) for m in self.messages if m.logger == logger]


def expected(era: str) -> list[tuple[str, str | None, Any]]:
    # 2025-11-25 clients that set no level get every level, as the SDK's servers send them;
    # the 2026-07-28 clients below opted in to debug.
    return [DEBUG, WARNING]


@pytest.mark.parametrize("down", DOWNSTREAM)
@pytest.mark.parametrize("era", ERAS)
async def test_a_proxied_calls_server_logs_reach_our_client(era: str, down: ProtocolMode) -> None:
    inbox = Inbox()
    async with (
        chatty_node(down) as node,
        Client(
            serve(Gateway([node], []), expose_tools=True),
            mode=era,
            logging_callback=inbox,
            log_level="debug",
        ) as client,
    ):
        result = await client.call_tool("toy__chatty", {})
    assert not result.is_error
    assert inbox.heard() == expected(era)


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_a_2026_client_gets_the_levels_it_opted_in_to(down: ProtocolMode) -> None:
    inbox = Inbox()
    async with (
        chatty_node(down) as node,
        Client(
            serve(Gateway([node], []), expose_tools=True),
            mode="auto",
            logging_callback=inbox,
            log_level="warning",
        ) as client,
    ):
        await client.call_tool("toy__chatty", {})
    assert inbox.heard() == [WARNING]


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_each_2025_client_gets_the_levels_it_set(down: ProtocolMode) -> None:
    quiet, warned, unset = Inbox(), Inbox(), Inbox()
    async with chatty_node(down) as node:
        server = serve(Gateway([node], []), expose_tools=True)
        async with (
            Client(server, mode="legacy", logging_callback=quiet) as first,
            Client(server, mode="legacy", logging_callback=warned) as second,
            Client(server, mode="legacy", logging_callback=unset) as third,
        ):
            await set_log_level(first, "error")
            await set_log_level(second, "warning")
            for client in (first, second, third):
                await client.call_tool("toy__chatty", {})
            await set_log_level(first, "debug")  # a level set again replaces the last
            await first.call_tool("toy__chatty", {})
    assert quiet.heard() == [DEBUG, WARNING]
    assert warned.heard() == [WARNING]
    assert unset.heard() == [DEBUG, WARNING]


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_an_agent_runs_trace_notes_the_servers_logs_under_the_tool(
    down: ProtocolMode,
) -> None:
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    spec = AgentSpec("assistant", ScriptedModel([call("toy__chatty"), "ok"]), tools=["toy"])
    async with chatty_node(down) as node:
        result = await Gateway([node], [spec], hooks=[record]).run("assistant", "go")
    assert result.output == "ok"
    [tool_span] = [e for e in events if e.kind == "tool" and e.phase == "start"]
    notes = [e for e in events if e.phase == "note"]
    assert [(e.kind, e.name, e.parent_id) for e in notes] == [
        ("tool", "toy__chatty", tool_span.id)
    ] * 2
    assert [e.output for e in notes] == [
        {"log": level, "logger": logger, "data": data} for level, logger, data in (DEBUG, WARNING)
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_a_served_agents_client_hears_its_tools_server_logs(era: str) -> None:
    inbox = Inbox()
    spec = AgentSpec(
        "assistant",
        ScriptedModel([call("toy__chatty"), "ok"]),
        tools=["toy"],
        description="An agent.",
    )
    async with (
        chatty_node("modern") as node,
        Client(
            serve(Gateway([node], [spec])), mode=era, logging_callback=inbox, log_level="debug"
        ) as client,
    ):
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert not result.is_error
    assert inbox.heard() == expected(era)


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_a_gateway_calls_server_logs_reach_its_caller_and_its_trace(
    down: ProtocolMode,
) -> None:
    caller = Inbox()
    traced: list[Any] = []

    async def record(event: TraceEvent) -> None:
        if event.phase == "note" and isinstance(event.output, dict):
            traced.append(event.output.get("data"))

    async with chatty_node(down) as node:
        result = await Gateway([node], []).call_tool(
            "toy__chatty", {}, hooks=[record], context=CallContext(on_log=caller)
        )
    assert not result.is_error
    assert caller.heard() == [DEBUG, WARNING]
    assert traced == [DEBUG[2], WARNING[2]]


async def test_the_server_is_asked_for_the_most_verbose_level_a_client_set() -> None:
    """A server may send only what it chooses until a level is set (this one: warning and
    up): a client's `debug` reaches it, a later, less verbose level does not lower it, each
    client still hears only its own levels, and a restarted server is told again."""
    toy = ToyServer("toy")
    levels: list[types.LoggingLevel] = ["warning"]
    told_again = anyio.Event()

    async def take_level(_ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
        levels.append(params.level)
        if len(levels) == 4:
            told_again.set()
        return types.EmptyResult()

    toy.server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, take_level)
    order: list[str] = ["debug", "info", "notice", "warning", "error"]

    async def chatty(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        for level, logger, data in (DEBUG, WARNING):
            if order.index(level) >= order.index(levels[-1]):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", MCPDeprecationWarning)
                    await ctx.session.send_log_message(  # pyright: ignore[reportDeprecated]
                        level, data, logger, related_request_id=ctx.request_id
                    )
        return text_result("done")

    toy.add("chatty", chatty)
    config = McpServerConfig(command="in-process", protocol="legacy")
    quiet, verbose = Inbox(), Inbox()
    transport = CrashableTransport(toy.server)
    async with McpToolkit("toy", config, target=transport.connect) as node:
        server = serve(Gateway([node], []), expose_tools=True)
        async with (
            Client(server, mode="legacy", logging_callback=quiet) as first,
            Client(server, mode="legacy", logging_callback=verbose) as second,
        ):
            await set_log_level(first, "error")
            await set_log_level(second, "debug")
            await set_log_level(first, "warning")
            for client in (first, second):
                await client.call_tool("toy__chatty", {})
            assert levels == ["warning", "error", "debug"]
            transport.crash()
            with anyio.fail_after(10):
                await told_again.wait()
    assert levels == ["warning", "error", "debug", "debug"]
    assert quiet.heard() == [WARNING]
    assert verbose.heard() == [DEBUG, WARNING]
