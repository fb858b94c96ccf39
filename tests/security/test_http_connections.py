"""Connections are bounded before any token is checked: a client that opens connections and
never finishes a request (a header line now and then) held each one for ever, and could take
every file descriptor. Now a head has `read_timeout` to arrive, and at most `max_connections`
are open, the one waiting longest for a request closed to make room."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc
import httpx2
import pytest

from gateway.config import GatewaySettings
from gateway.server import HttpOptions, http_options, serve_http
from tests.server.support import calculator_gateway, serve
from toolkits import FunctionToolkit, function_tool

from .wire import LEGACY, MODERN, HttpWire, initialize, modern_params

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "connections-test-token-" + "x" * 16
AUTHORIZED = {"Authorization": f"Bearer {TOKEN}"}


@dataclass
class Served:
    url: str
    host: str
    port: int
    streams: AsyncExitStack

    async def connect(self, sent: bytes = b"") -> anyio.abc.SocketStream:
        """A connection (closed with the server) that sent `sent`."""
        stream = await anyio.connect_tcp(self.host, self.port)
        await self.streams.enter_async_context(stream)
        if sent:
            await stream.send(sent)
        return stream

    async def slow_client(self) -> anyio.abc.SocketStream:
        """A connection that started a request and has not finished its head."""
        return await self.connect(
            f"POST /mcp HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n".encode()
        )


class Hold:
    """A tool that answers once released."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()

        async def hold() -> str:
            """Wait for the test."""
            self.started.set()
            await self.release.wait()
            return "released"

        self.node = FunctionToolkit("hold", [function_tool(hold)])


@asynccontextmanager
async def gateway(options: HttpOptions, hold: Hold | None = None) -> AsyncGenerator[Served]:
    server = serve(
        calculator_gateway(nodes=[hold.node] if hold else []), expose_tools=hold is not None
    )
    ready = anyio.Event()
    urls: list[str] = []

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    async with AsyncExitStack() as streams, anyio.create_task_group() as tg:
        stop = anyio.Event()
        tg.start_soon(lambda: serve_http(server, options, on_ready=on_ready, stop=stop))
        await ready.wait()
        port = int(urls[0].rsplit(":", 1)[1].split("/")[0])
        try:
            yield Served(urls[0], "127.0.0.1", port, streams)
        finally:
            stop.set()


async def closed(stream: anyio.abc.SocketStream) -> bool:
    """Whether the server closed the connection (read to its end; an answer may come first)."""
    try:
        while await stream.receive():
            pass
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return True
    return False


async def test_a_connection_that_does_not_finish_its_head_in_time_is_closed() -> None:
    options = HttpOptions("127.0.0.1", 0, tokens=(TOKEN,), read_timeout=0.5)
    async with gateway(options) as served, httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20):
            # Opened before the slow ones, it is served throughout: no deadline for it.
            wire = HttpWire(http, served.url, LEGACY)
            http.headers.update(AUTHORIZED)
            await wire.open()
            assert wire.session_id is not None
            headers = {
                "Accept": "text/event-stream",
                "Mcp-Session-Id": wire.session_id,
                "MCP-Protocol-Version": LEGACY,
                **AUTHORIZED,
            }
            async with http.stream("GET", served.url, headers=headers) as stream:
                assert stream.status_code == 200
                slow = await served.slow_client()
                silent = await served.connect()
                assert await closed(slow)
                assert await closed(silent)
                # A body answered early (401 from the head) and never sent: closed too.
                dripping = await served.connect(
                    f"POST /mcp HTTP/1.1\r\nHost: {served.host}:{served.port}\r\n"
                    "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{".encode()
                )
                assert await closed(dripping)
                # The GET stream outlived them all: it ends (whole) when its session does.
                ended = {"Mcp-Session-Id": wire.session_id, "MCP-Protocol-Version": LEGACY}
                assert (await http.delete(served.url, headers=ended)).status_code == 200
                async for _ in stream.aiter_raw():  # raises if cut off mid-stream
                    pass


async def test_slow_connections_beyond_the_cap_make_room_and_requests_go_on() -> None:
    options = HttpOptions("127.0.0.1", 0, tokens=(TOKEN,), max_connections=8, read_timeout=60)
    async with gateway(options) as served, httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(30):
            slow = [await served.slow_client() for _ in range(30)]
            answered = await http.post(
                served.url,
                content=json.dumps(initialize()),
                headers={
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                    "MCP-Protocol-Version": LEGACY,
                    **AUTHORIZED,
                },
            )
            # The 23 oldest were closed to make room (and one more for the request).
            assert [await closed(stream) for stream in slow[:23]] == [True] * 23
    assert answered.status_code == 200


async def test_when_every_connection_serves_a_request_a_new_one_gets_503() -> None:
    hold = Hold()
    options = HttpOptions("127.0.0.1", 0, max_connections=1)
    async with (
        gateway(options, hold) as served,
        httpx2.AsyncClient(timeout=10) as first,
        httpx2.AsyncClient(timeout=10) as second,
    ):
        with anyio.fail_after(30):
            wire = HttpWire(first, served.url, MODERN)
            call = modern_params({"name": "hold", "arguments": {}})
            request = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call}
            answers: list[httpx2.Response] = []
            async with anyio.create_task_group() as tg:
                tg.start_soon(wire.post, json.dumps(request).encode())
                await hold.started.wait()
                answers.append(await second.get(served.url))
                hold.release.set()
    [refused] = answers
    assert refused.status_code == 503
    assert refused.text == "Too many connections\n"


async def answered(stream: anyio.abc.SocketStream) -> bytes:
    """What the server sent before it closed the connection."""
    said = b""
    try:
        while chunk := await stream.receive():
            said += chunk
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        pass
    return said


async def test_a_head_over_64_kib_is_refused_431_as_it_arrives_before_the_token_check() -> None:
    options = HttpOptions("127.0.0.1", 0, tokens=(TOKEN,))
    async with gateway(options) as served:
        start = f"GET /v1/models HTTP/1.1\r\nHost: {served.host}:{served.port}\r\n"
        with anyio.fail_after(20):
            # Under the cap: read whole, then refused for its token (and kept alive).
            near = f"{start}X-Junk: {'a' * 60_000}\r\n\r\n".encode()
            fits = await served.connect(near)
            assert (await fits.receive()).startswith(b"HTTP/1.1 401 ")
            # The next request on that connection has a cap of its own, as does a new one's:
            # answered while the head is still coming in (it never ends here).
            huge = f"{start}X-Junk: {'a' * 200_000}".encode()
            await fits.send(huge)
            big = await served.connect(huge)
            for stream in (fits, big):
                said = await answered(stream)
                assert said.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n")
                assert said.endswith(b"The request's head is too large\n")
            # Many short header lines add up the same.
            lines = "".join(f"X-H{n}: {'b' * 100}\r\n" for n in range(1000))
            many = await served.connect(f"{start}{lines}\r\n".encode())
            assert (await answered(many)).startswith(b"HTTP/1.1 431 ")


def test_the_cap_comes_from_the_config() -> None:
    assert http_options("127.0.0.1:0", GatewaySettings()).max_connections == 2048
    settings = GatewaySettings(http_max_connections=64)
    assert http_options("127.0.0.1:0", settings).max_connections == 64
