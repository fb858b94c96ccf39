"""Per-client quotas over HTTP hold for 2026-07-28 clients too, whose requests come on no
session: such a client is its authenticated principal, else its address.

A real downstream SDK server over HTTP on 127.0.0.1 whose `pass` calls wait for a ticket each;
a gateway in front of it over real HTTP (in this process, the pass-through on and off, and a
real `agent-gateway serve --http`); SDK clients of both eras.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import anyio.lowlevel
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served.pass_through import PassThrough
from gateway.server.serving import ClientQuotas
from tests.servers.asgi import serve_on_loopback
from tests.servers.turnstile import Turnstile
from toolkits.mcp import McpServerConfig, McpToolkit

from .processes import http_server
from .support import serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKENS = ("tok-a-5e1", "tok-b-5e1")


@asynccontextmanager
async def front(
    down_url: str, options: HttpOptions, *, pass_through: bool
) -> AsyncGenerator[tuple[str, Gateway, PassThrough | None]]:
    """A gateway whose clients may each have two calls in flight on the downstream."""
    async with McpToolkit("d", McpServerConfig(url=down_url)) as node:
        gateway = Gateway([node], [], max_concurrency=2)
        app = http_app(serve(gateway, expose_tools=True, pass_through=pass_through), options)
        async with serve_on_loopback(app) as base:
            layers = [layer for layer in app.state.layers if isinstance(layer, PassThrough)]
            yield f"{base}/mcp", gateway, layers[0] if layers else None


@asynccontextmanager
async def client(url: str, mode: str, token: str | None = None) -> AsyncGenerator[Client]:
    async with AsyncExitStack() as stack:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        http = await stack.enter_async_context(httpx2.AsyncClient(headers=headers))
        opened = Client(streamable_http_client(url, http_client=http), mode=mode)
        mcp = await stack.enter_async_context(opened)
        await mcp.list_tools()  # as clients do; a call before any listing takes the usual path
        yield mcp


async def calls_waiting(gateway: Gateway, count: int) -> None:
    """Until `count` calls wait for the downstream's slots (their clients' quotas full)."""
    limit = gateway.node_limit("d")
    while sum(share.waiting for share in limit.waiting) < count:
        await anyio.lowlevel.checkpoint()


# Who else calls: a 2025-era session, a 2026-07-28 client with a token of its own, or one
# with no token from the same host (which shares the first one's quota).
OTHERS = ["session", "own token", "same host"]


@pytest.mark.parametrize("pass_through", [True, False], ids=["passed-through", "usual-path"])
@pytest.mark.parametrize("other", OTHERS)
async def test_a_2026_07_28_http_client_keeps_to_its_quota(pass_through: bool, other: str) -> None:
    down = Turnstile()
    tokens = TOKENS if other == "own token" else ()
    options = HttpOptions("127.0.0.1", 0, tokens=tokens)
    with anyio.fail_after(30):
        async with (
            down,
            serve_on_loopback(down.server.streamable_http_app(host="127.0.0.1")) as base,
            front(f"{base}/mcp", options, pass_through=pass_through) as (url, gateway, layer),
            client(url, "auto", tokens[0] if tokens else None) as a,
            client(
                url, "legacy" if other == "session" else "auto", tokens[1] if tokens else None
            ) as b,
            anyio.create_task_group() as tg,
        ):
            for _ in range(4):
                tg.start_soon(a.call_tool, "d__pass", {"who": "a"})
            await down.until_started(2)
            await calls_waiting(gateway, 2)  # a's quota is two
            tg.start_soon(b.call_tool, "d__pass", {"who": "b"})
            if other == "same host":  # b's call waits in the same queue, behind a's
                await calls_waiting(gateway, 3)
                down.let_through(1)
                await down.until_started(3)
                assert down.started == ["a", "a", "a"]
            else:  # b's own quota: its call goes straight on
                await down.until_started(3)
                assert down.started == ["a", "a", "b"]
            down.let_through(5)
        assert sorted(down.started) == ["a", "a", "a", "a", "b"]
        if layer is not None:
            assert layer.forwarded >= 4


async def test_serve_http_bounds_each_2026_07_28_client_by_its_quota(tmp_path: Path) -> None:
    """The tester's case, on a real `serve --http` with `[gateway] max_concurrency = 2`: a
    2026-07-28 client with calls beyond its quota delays no other client."""
    down = Turnstile()
    with anyio.fail_after(60):
        async with (
            down,
            serve_on_loopback(down.server.streamable_http_app(host="127.0.0.1")) as base,
        ):
            config = tmp_path / "agent-gateway.toml"
            config.write_text(
                "[gateway]\nexpose_tools = true\nmax_concurrency = 2\n"
                f'[mcpServers.d]\nurl = "{base}/mcp"\n'
            )
            async with (
                http_server(config) as served,
                client(f"{served.url}", "auto") as a,
                client(f"{served.url}", "legacy") as b,
                anyio.create_task_group() as tg,
            ):
                for _ in range(6):
                    tg.start_soon(a.call_tool, "d__pass", {"who": "a"})
                await down.until_started(2)
                # b's call has its own quota: it starts while four of a's wait at the gateway.
                tg.start_soon(b.call_tool, "d__pass", {"who": "b"})
                await down.until_started(3)
                assert down.started == ["a", "a", "b"]
                down.let_through(7)
            assert down.started.count("a") == 6


async def test_idle_callers_quotas_are_dropped_once_many_gathered() -> None:
    gateway = Gateway([], [])
    quotas = ClientQuotas()
    busy = quotas.of_caller("address 10.0.0.1", gateway)
    async with busy.limiter("n"):  # a call in flight: its quota stays
        for i in range(10_000):
            quotas.of_caller(f"address 10.1.{i // 256}.{i % 256}", gateway)
        assert quotas.callers <= 512
        assert quotas.of_caller("address 10.0.0.1", gateway) is busy
