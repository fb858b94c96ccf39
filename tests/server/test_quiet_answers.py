"""A tool call that stays silent past the keep-alive interval (15 s) and then returns megabytes
reaches the mcp SDK's client over HTTP: its silence is kept alive with whitespace before a
JSON body, not with `: ping`s that make the answer an event stream (the SDK's client refuses
an event over 1 MB). Both eras, passed through and on the SDK's path; a client that may be
asked a question on the call still gets pings as an event stream, which the question needs.

The intervals (ours, the SDK's for both eras) are cut to 50 ms, and the tool answers once
three keep-alives went: no sleeps."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
import pytest
import sse_starlette.sse
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer
from mcp.server import _streamable_http_modern as sdk_modern  # pyright: ignore[reportPrivateUsage]
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served import pass_through_reply
from gateway.server.served.pass_through import PassThrough
from tests.servers.asgi import serve_on_loopback
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

BIG = 2 * 1024 * 1024
"""Twice what the SDK's client takes in one event."""
WANTED = 3
"""Keep-alives sent before the tool answers."""


class KeepAlives:
    """ASGI middleware noting the keep-alives in the answers to POSTs: a newline in a JSON
    body, or a `: ping` in an event stream; `enough` once `WANTED` of either went."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.json = 0
        self.pings = 0
        self.enough = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)  # the GET of a 2025-era session's stream
            return

        async def noting(message: Message) -> None:
            if message["type"] == "http.response.body" and message.get("more_body"):
                body: bytes = message.get("body", b"")
                self.json += body == b"\n"
                self.pings += body.startswith(b": ping")
                if max(self.json, self.pings) >= WANTED:
                    self.enough.set()
            await send(message)

        await self.app(scope, receive, noting)


def downstream(size: int) -> tuple[MCPServer, anyio.Event]:
    """A server whose tool `quiet` says nothing until released, then returns `size` bytes."""
    server = MCPServer("down")
    release = anyio.Event()

    @server.tool()
    async def quiet() -> str:  # pyright: ignore[reportUnusedFunction]
        """Work in silence, then return a lot."""
        await release.wait()
        return "x" * size

    return server, release


async def quiet_call(
    era: str, pass_through: bool, size: int, **client: Any
) -> tuple[str, KeepAlives, int]:
    """The result of `d__quiet` (`size` bytes) through a gateway over HTTP, the keep-alives,
    and how many calls were passed through."""
    server, release = downstream(size)
    results: list[types.CallToolResult] = []
    async with (
        serve_on_loopback(server.streamable_http_app(host="127.0.0.1")) as base,
        McpToolkit("d", McpServerConfig(url=f"{base}/mcp", protocol="auto")) as node,
    ):
        settings = {"expose_tools": True, "pass_through": pass_through}
        app = http_app(serve(Gateway([node], []), **settings), HttpOptions("127.0.0.1", 0))
        layers = [layer for layer in app.state.layers if isinstance(layer, PassThrough)]
        noted = KeepAlives(app)
        async with (
            serve_on_loopback(noted) as front,
            Client(f"{front}/mcp", mode=era, **client) as c,
            anyio.create_task_group() as tg,
        ):
            await c.list_tools()  # a call passes through once its tool was listed

            async def call() -> None:
                results.append(await c.call_tool("d__quiet", {}))

            tg.start_soon(call)
            await noted.enough.wait()
            release.set()
    [result] = results
    assert not result.is_error, result_text(result)
    [block] = result.content
    assert isinstance(block, types.TextContent)
    return block.text, noted, sum(layer.forwarded for layer in layers)


@pytest.fixture
def short_intervals(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every keep-alive interval on the way (ours; the SDK's, both eras) at 50 ms."""
    monkeypatch.setattr(pass_through_reply, "_PING_SECONDS", 0.05)
    monkeypatch.setattr(sdk_modern, "_SSE_PING_INTERVAL", 0.05)
    monkeypatch.setattr(sse_starlette.sse.EventSourceResponse, "DEFAULT_PING_INTERVAL", 0.05)


@pytest.mark.usefixtures("short_intervals")
@pytest.mark.parametrize("pass_through", [True, False], ids=["passed-through", "sdk-path"])
@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_a_quiet_call_returning_megabytes_is_kept_alive_as_json(
    era: str, pass_through: bool
) -> None:
    with anyio.fail_after(60):
        text, noted, forwarded = await quiet_call(era, pass_through, BIG)
    assert text == "x" * BIG
    assert noted.json >= WANTED
    assert noted.pings == 0
    assert forwarded == (1 if pass_through else 0)


@pytest.mark.usefixtures("short_intervals")
@pytest.mark.parametrize("pass_through", [True, False], ids=["passed-through", "sdk-path"])
async def test_a_quiet_call_whose_client_may_be_asked_pings_as_an_event_stream(
    pass_through: bool,
) -> None:
    async def elicit(
        _ctx: ClientRequestContext, _params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    with anyio.fail_after(60):
        text, noted, _ = await quiet_call("legacy", pass_through, 10, elicitation_callback=elicit)
    assert text == "x" * 10  # over 1 MB, the SDK's client would refuse it (README)
    assert noted.pings >= WANTED
    assert noted.json == 0


@pytest.mark.usefixtures("short_intervals")
@pytest.mark.parametrize("pass_through", [True, False], ids=["passed-through", "sdk-path"])
async def test_a_quiet_call_cancelled_after_its_json_began_ends_it_as_json(
    pass_through: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The body begun must end as JSON: a JSON-RPC error, which the client drops (it no
    longer waits on that id), and its session goes on."""
    server, _release = downstream(10)
    with anyio.fail_after(60):
        async with (
            serve_on_loopback(server.streamable_http_app(host="127.0.0.1")) as base,
            McpToolkit("d", McpServerConfig(url=f"{base}/mcp", protocol="auto")) as node,
        ):
            settings = {"expose_tools": True, "pass_through": pass_through}
            app = http_app(serve(Gateway([node], []), **settings), HttpOptions("127.0.0.1", 0))
            noted = KeepAlives(app)
            async with (
                serve_on_loopback(noted) as front,
                Client(f"{front}/mcp", mode="legacy") as client,
            ):
                await client.list_tools()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(client.call_tool, "d__quiet", dict[str, Any]())
                    await noted.enough.wait()
                    tg.cancel_scope.cancel()  # the client sends notifications/cancelled
                listed = await client.list_tools()
    assert noted.json >= WANTED
    assert [tool.name for tool in listed.tools] == ["d__quiet"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
