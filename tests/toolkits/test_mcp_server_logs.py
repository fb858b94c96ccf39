"""A server's log messages during a call go to the `on_log` of the call they belong to:
exactly where the SDK says which call (in the call's context), by the single owner of the
calls in flight where it does not (a pipe); to nobody when that is ambiguous. The node's
Python log has every message either way."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.servers.catalog import pipe
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import CallContext
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio


class Inbox:
    def __init__(self) -> None:
        self.data: list[Any] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.data.append(params.data)


def meeting_server() -> ToyServer:
    """`meet(n)`: waits until two calls are in, then logs `call <n>` (info, logger `meet`)."""
    toy = ToyServer("toy")
    arrived: list[int] = []
    both_in = anyio.Event()

    async def meet(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        arrived.append(int(args["n"]))
        if len(arrived) == 2:
            both_in.set()
        await both_in.wait()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.session.send_log_message(  # pyright: ignore[reportDeprecated]
                "info", f"call {args['n']}", "meet", related_request_id=ctx.request_id
            )
        return text_result("met")

    toy.add("meet", meet)
    return toy


def node_for(toy: ToyServer, over: str) -> McpToolkit:
    # "pipe": handshake era over memory streams, which (like stdio) do not say which call a
    # message belongs to; "context": 2026-07-28 in process, where the call's context does.
    if over == "pipe":
        config = McpServerConfig(command="in-process", protocol="legacy")
        return McpToolkit("toy", config, target=lambda: pipe(toy.server))
    config = McpServerConfig(command="in-process", protocol="modern")
    return McpToolkit("toy", config, target=toy.server)


async def call_as(node: McpToolkit, n: int, inbox: Inbox, owner: object) -> None:
    await node.call_tool("toy__meet", {"n": n}, context=CallContext(on_log=inbox, owner=owner))


@pytest.mark.parametrize("over", ["pipe", "context"])
async def test_calls_of_one_owner_hear_the_messages(over: str) -> None:
    inbox = Inbox()
    owner = object()
    async with node_for(meeting_server(), over) as node, anyio.create_task_group() as tg:
        tg.start_soon(call_as, node, 1, inbox, owner)
        tg.start_soon(call_as, node, 2, inbox, owner)
    assert sorted(inbox.data) == ["call 1", "call 2"]


async def test_each_call_hears_its_own_messages_where_the_sdk_says_which_call() -> None:
    first, second = Inbox(), Inbox()
    async with node_for(meeting_server(), "context") as node, anyio.create_task_group() as tg:
        tg.start_soon(call_as, node, 1, first, object())
        tg.start_soon(call_as, node, 2, second, object())
    assert (first.data, second.data) == (["call 1"], ["call 2"])


async def test_messages_of_calls_of_several_owners_go_to_nobody_over_a_pipe(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.toy")
    first, second = Inbox(), Inbox()
    async with node_for(meeting_server(), "pipe") as node, anyio.create_task_group() as tg:
        tg.start_soon(call_as, node, 1, first, object())
        tg.start_soon(call_as, node, 2, second, object())
    assert (first.data, second.data) == ([], [])
    logged = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.toy"]
    assert {"server log [meet]: call 1", "server log [meet]: call 2"} <= set(logged)


async def test_an_owner_is_told_apart_by_identity_not_by_hash() -> None:
    inbox = Inbox()
    owner: list[str] = []  # unhashable, like a dataclass with eq (the engine's tracer)
    async with node_for(meeting_server(), "pipe") as node, anyio.create_task_group() as tg:
        tg.start_soon(call_as, node, 1, inbox, owner)
        tg.start_soon(call_as, node, 2, inbox, owner)
    assert sorted(inbox.data) == ["call 1", "call 2"]
