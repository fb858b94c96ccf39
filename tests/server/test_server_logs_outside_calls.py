"""A downstream server's log messages sent while no call is in flight reach the 2025-era
clients that can receive them (a standalone channel: the stdio pipe, an HTTP session's GET
stream), each at the level it set, tagged with the node; 2026-07-28 clients have no such
channel. On the usual path, and through the fronts that pass calls through (HTTP and stdio):
the message comes on the node's session either way."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import anyio
import anyio.lowlevel
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPDeprecationWarning

from gateway import Gateway
from gateway.server import HttpOptions
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits.mcp import McpServerConfig, McpToolkit

from .proxying import gateway_front, set_log_level
from .stdio_fronts import stdio_front
from .support import serve
from .test_pass_through import Downstream, front

pytestmark = pytest.mark.anyio


class Inbox:
    """A client's `logging_callback`: what it heard, and a way to wait for more."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, str | None, Any]] = []
        self._changed = anyio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.heard.append((params.level, params.logger, params.data))
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, count: int) -> None:
        """Wait for `count` messages (a message never heard fails here, not at teardown)."""
        with anyio.fail_after(10):
            while len(self.heard) < count:
                await self._changed.wait()


async def log_outside(session: Any, level: types.LoggingLevel, data: str) -> None:
    """The server logs on its session, related to no request."""
    with warnings.catch_warnings():  # logging is deprecated at 2026-07-28: not ours to act on
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await session.send_log_message(level, data, "watcher")


async def test_a_log_outside_calls_reaches_each_2025_client_at_its_level() -> None:
    toy = ToyServer("toy", logging=True)
    sessions: list[Any] = []

    async def hold(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        sessions.append(ctx.session)
        return text_result("held")

    toy.add("hold", hold)
    unset, quiet, modern = Inbox(), Inbox(), Inbox()
    config = McpServerConfig(command="in-process")
    with anyio.fail_after(20):
        async with McpToolkit("toy", config, target=toy.server) as node:
            server = serve(Gateway([node], []), expose_tools=True)
            async with (
                Client(server, mode="legacy", logging_callback=unset) as first,
                Client(server, mode="legacy", logging_callback=quiet) as second,
                Client(server, logging_callback=modern, log_level="debug") as third,
            ):
                await set_log_level(second, "error")
                for client in (first, second, third):
                    await client.call_tool("toy__hold", {})
                # The node's one connection, whichever call's session object says it.
                await log_outside(sessions[0], "warning", "disk low")
                await log_outside(sessions[0], "error", "disk full")
                await unset.until(2)
                await quiet.until(1)  # after the warning: one queue, in order
    assert unset.heard == [
        ("warning", "toy/watcher", "disk low"),
        ("error", "toy/watcher", "disk full"),
    ]
    assert quiet.heard == [("error", "toy/watcher", "disk full")]
    assert modern.heard == []  # a 2026-07-28 client has no channel outside its requests


async def test_a_log_outside_calls_reaches_a_session_through_both_http_fronts() -> None:
    down = Downstream()
    heard: dict[str, list[Any]] = {}
    with anyio.fail_after(60):
        async with (
            serve_on_loopback(down.app()) as base,
            front(f"{base}/mcp", pass_through=True) as (fast, layer),
            front(f"{base}/mcp", pass_through=False) as (usual, _),
        ):
            assert layer is not None
            for url in (fast, usual):
                inbox = Inbox()
                async with Client(url, mode="legacy", logging_callback=inbox) as client:
                    await client.list_tools()
                    await client.call_tool("d__hold_session", {})
                    await log_outside(down.session, "info", "tick")
                    await inbox.until(1)
                heard[url] = inbox.heard
            assert layer.forwarded == 1
    assert heard[fast] == heard[usual] == [("info", "d/watcher", "tick")]


async def test_a_log_outside_calls_reaches_a_stdio_client_on_both_paths() -> None:
    down = Downstream(logging=True)
    heard: list[list[Any]] = []
    with anyio.fail_after(60):
        async with serve_on_loopback(down.app()) as base:
            config = McpServerConfig(url=f"{base}/mcp")
            for pass_through in (True, False):
                inbox = Inbox()
                async with (
                    stdio_front(config, pass_through=pass_through) as stdio,
                    Client(stdio.client(), mode="legacy", logging_callback=inbox) as client,
                ):
                    await client.list_tools()
                    await set_log_level(client, "notice")
                    await client.call_tool("d__hold_session", {})
                    await log_outside(down.session, "info", "tick")  # below its level
                    await log_outside(down.session, "notice", "tock")
                    await inbox.until(1)
                    assert stdio.forwarded == (1 if pass_through else 0)
                heard.append(inbox.heard)
    assert heard == [[("notice", "d/watcher", "tock")]] * 2


async def test_a_log_outside_calls_goes_to_no_client_that_came_with_a_token(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """With tokens, clients may be different people: a message that belongs to no call is
    for the gateway's own log only."""
    down = Downstream()
    inbox = Inbox()
    options = HttpOptions("127.0.0.1", 0, tokens=("token-of-ann-5e1f",))
    with anyio.fail_after(30), caplog.at_level(logging.DEBUG, "gateway.server.notifications"):
        async with (
            serve_on_loopback(down.app()) as base,
            gateway_front(McpServerConfig(url=f"{base}/mcp"), options=options) as (url, _, _),
            httpx2.AsyncClient(headers={"authorization": "Bearer token-of-ann-5e1f"}) as http,
            Client(
                streamable_http_client(url, http_client=http),
                mode="legacy",
                logging_callback=inbox,
            ) as client,
        ):
            await client.list_tools()
            await client.call_tool("d__hold_session", {})
            await log_outside(down.session, "error", "ann's disk full")
            while "d logged outside calls: no client to tell" not in caplog.text:
                await anyio.lowlevel.checkpoint()
    assert inbox.heard == []
