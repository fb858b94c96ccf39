"""An SSE node's event stream (server-everything, which sends no keep-alive): kept while
quiet whatever the SDK's read timeout, and when quiet past `sse_idle_timeout`, made again with
that reason and no traceback. A streamable HTTP node's GET stream, on which its server says
what it says outside a call, is kept while quiet too.

Before (QA round 7), the SDK's `sse_read_timeout` (300 s) ended every quiet stream: an ERROR
with an 80-line traceback from `mcp.client.sse`, "the server closed the connection" as the
reason, and the server's session state lost at each reconnect. A streamable HTTP node's GET
stream timed out after its client's 300 s too, and the SDK gave it up after two in a row: a
node quiet for ten minutes never heard its server's list changes again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from contextlib import contextmanager
from functools import partial
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

import toolkits.mcp.transport as transport
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import Context, ToyServer
from tests.servers.real import everything_http
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SDK_READ_TIMEOUT = 0.2
"""The SDK's read timeout made short: it would end the stream long before ours."""
IDLE = 1.5


class Heard(logging.Handler):
    """Every log record while it listens, to wait on with no sleep."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, text: str, count: int = 1) -> str:
        """The `count`th message saying `text`, once there is one."""
        while True:
            changed = self._changed
            found = [r.getMessage() for r in self.records if text in r.getMessage()]
            if len(found) >= count:
                return found[count - 1]
            await changed.wait()


@contextmanager
def heard() -> Generator[Heard]:
    handler, root = Heard(), logging.getLogger()
    was = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(was)


async def test_a_quiet_event_stream_outlasts_the_sdks_read_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call answered after a second with nothing on the stream meanwhile (no progress token,
    so no progress): the stream is quiet 5 times the SDK's read timeout."""
    short = partial(transport.sse_client, sse_read_timeout=SDK_READ_TIMEOUT)
    monkeypatch.setattr(transport, "sse_client", short)
    with heard() as log:
        async with everything_http("sse") as url:
            config = McpServerConfig(transport="sse", url=url)
            async with McpToolkit("evs", config) as node:
                with anyio.fail_after(30):
                    slow = await node.call_tool(
                        "evs__trigger-long-running-operation", {"duration": 1, "steps": 1}
                    )
                    echo = await node.call_tool("evs__echo", {"message": "after"})
    assert "Long running operation completed" in result_text(slow)
    assert result_text(echo) == "Echo: after"
    assert [r.getMessage() for r in log.records if "connection lost" in r.getMessage()] == []
    errors = [r for r in log.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == []


async def test_a_quiet_event_stream_is_kept_until_its_idle_timeout(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    short = partial(transport.sse_client, sse_read_timeout=SDK_READ_TIMEOUT)
    monkeypatch.setattr(transport, "sse_client", short)
    with heard() as log:
        async with everything_http("sse") as url:
            config = McpServerConfig(transport="sse", url=url, sse_idle_timeout=IDLE)
            async with McpToolkit("evs", config) as node:
                with anyio.fail_after(30):
                    quiet_since = anyio.current_time()
                    lost = await log.until("connection lost")
                    quiet_for = anyio.current_time() - quiet_since
                    await log.until("connected (protocol", count=2)  # made again
                    echo = await node.call_tool("evs__echo", {"message": "after"})
    assert lost == f"connection lost: the server sent nothing for {IDLE:g} s (sse_idle_timeout)"
    # Quiet since its last message, a little before the node was ready: not the SDK's 0.2 s.
    assert quiet_for > IDLE - 0.5
    assert result_text(echo) == "Echo: after"
    errors = [r for r in log.records if r.levelno >= logging.ERROR or r.exc_info]
    assert errors == []


class ShortGetReads(httpx2.AsyncBaseTransport):
    """Sends every GET on with a 0.1 s read timeout, as a client-wide one would give it."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "GET":
            timeouts = {**request.extensions.get("timeout", {}), "read": 0.1}
            request.extensions = {**request.extensions, "timeout": timeouts}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


def test_an_idle_timeout_is_for_sse_servers_only() -> None:
    with pytest.raises(ValueError, match="'sse_idle_timeout' does not apply to an http server"):
        McpServerConfig(url="http://127.0.0.1:1/mcp", sse_idle_timeout=5)


async def test_a_quiet_get_stream_of_a_streamable_http_server_is_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call answered after 1.5 s with nothing on the GET stream meanwhile, 15 times the read
    timeout its request came with: the server's list change after it still reaches the node.

    Only the GET stream comes with 0.1 s: given to the whole client, it failed the POSTs of
    the handshake on a busy machine, and the node never connected."""
    real = transport.event_streams

    def short_reads(
        inner: httpx2.AsyncBaseTransport, on_lost: Callable[[str], None], idle: float | None
    ) -> httpx2.AsyncBaseTransport:
        return ShortGetReads(real(inner, on_lost, idle))

    monkeypatch.setattr(transport, "event_streams", short_reads)
    toy = ToyServer()

    async def slow(_ctx: Context, _args: dict[str, object]) -> types.CallToolResult:
        await anyio.sleep(1.5)  # the server's own work, while its GET stream is quiet
        return types.CallToolResult(content=[types.TextContent(type="text", text="done")])

    async def grow(ctx: Context, _args: dict[str, object]) -> types.CallToolResult:
        toy.add_echo("extra")
        await toy.announce_change(ctx)
        return types.CallToolResult(content=[])

    toy.add("slow", slow)
    toy.add("grow", grow)
    changed = anyio.Event()

    async def heard_change(_node: str) -> None:
        changed.set()

    with heard() as log:
        async with serve_on_loopback(toy.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol="legacy")
            async with McpToolkit("toy", config) as node:
                node.subscribe(heard_change)
                with anyio.fail_after(20):
                    assert result_text(await node.call_tool("toy__slow", {})) == "done"
                    await node.call_tool("toy__grow", {})
                    await changed.wait()
                    names = {tool.name for tool in await node.list_tools()}
    assert "toy__extra" in names
    errors = [r for r in log.records if r.levelno >= logging.ERROR]
    assert errors == []


async def _refusing_sse(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A legacy SSE server's front whose event stream can give no session, by its path."""
    if scope["type"] != "http":
        return
    mode = scope["path"].strip("/").split("/")[0]
    if mode == "broken":
        start = {"type": "http.response.start", "status": 500}
        await send({**start, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"upstream broke"})
        return
    headers = [(b"content-type", b"text/event-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if mode == "elsewhere":  # a comment, then the endpoint, in pieces (\r\n split too)
        for piece in (
            b": hi\r\n\r",
            b"\nevent: endpoint\r\nda",
            b"ta: http://127.0.0.1:9/m\r\n\r\n",
        ):
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await anyio.sleep_forever()
    await send({"type": "http.response.body", "body": b": closing\n\n"})


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("elsewhere", "gave an endpoint on another origin (http://127.0.0.1:9): refused"),
        ("closing", "closed its event stream before sending its endpoint"),
        ("broken", "answered HTTP 500 (Internal Server Error): upstream broke"),
    ],
)
async def test_an_sse_stream_that_gives_no_session_fails_the_connect_at_once_saying_why(
    mode: str, said: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An endpoint on another origin hung the connect for its whole connect_timeout (60 s)
    after an SDK traceback, then said "TimeoutError"; a stream closed before its endpoint said
    "RuntimeError: Child exited without calling task_status.started()"; a 500 said httpx's
    words with an MDN link, not the server's."""
    async with serve_on_loopback(_refusing_sse) as base:
        config = McpServerConfig(transport="sse", url=f"{base}/{mode}/sse", connect_timeout=60)
        with anyio.fail_after(20):
            async with McpToolkit("s", config) as node:
                health = await node.wait_for_health(lambda h: h.state == "failed")
    assert health.last_error == f"EventStreamRefused: MCP server 's' {said}"
    assert [r for r in caplog.records if r.name.startswith("mcp.")] == []  # no SDK traceback
