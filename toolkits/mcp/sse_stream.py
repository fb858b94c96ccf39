"""A server's event stream: kept however long it is quiet, and ended with its reason.

The legacy SSE transport carries every answer on one long GET. The SDK's client (mcp 2.3)
gives that GET a read timeout (`sse_read_timeout`, 300 s), but a server that sends no
keep-alive (the TypeScript SDK's send none) is quiet for as long as nobody calls it: an idle
node lost its connection every 5 minutes, and the server's session state with it (toggles,
session resources, roots), with an ERROR and a traceback from the SDK and "the server closed
the connection" as the reason. Here the event stream has no read timeout unless
`sse_idle_timeout` sets one (any byte counts, an event or a keep-alive comment), and TCP
keep-alive notices a server host that is gone while the stream is quiet. A stream that fails
ends as one the server closed (so the SDK logs no traceback), `on_lost` told why first.

A streamable HTTP server (2025-11-25) sends what it says outside a call (list changes, logs,
resource updates) on a GET event stream, read with the client's 300 s timeout too: the SDK
opens it again after a failure, but gives up after two in a row, so a node quiet for ten
minutes heard nothing of its server from then on. Its GET stream is kept the same way, and
one that fails ends as closed, which the SDK opens again however often.

sse_transport(on_lost, idle) -> the transport of an SSE node's HTTP client
event_streams(inner, on_lost, idle) -> `inner`, its event streams kept so
KEEP_ALIVE -> the socket options of a connection probed when quiet
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable

import httpx2

from .error_text import describe_error

__all__ = ["KEEP_ALIVE", "event_streams", "sse_transport"]

KEEP_ALIVE = [
    (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
    *(
        (socket.IPPROTO_TCP, getattr(socket, option), value)
        for option, value in (("TCP_KEEPIDLE", 60), ("TCP_KEEPINTVL", 15), ("TCP_KEEPCNT", 4))
        if hasattr(socket, option)  # Linux's; elsewhere the system's defaults
    ),
]
"""A quiet connection is probed after 60 s, and given up after 4 probes 15 s apart unanswered."""


def sse_transport(on_lost: Callable[[str], None], idle: float | None) -> httpx2.AsyncBaseTransport:
    """The transport of an SSE node's client: its event stream read with `idle` seconds (None:
    no limit) allowed between two bytes, `on_lost(why)` called when the stream fails."""
    return event_streams(httpx2.AsyncHTTPTransport(socket_options=KEEP_ALIVE), on_lost, idle)


def event_streams(
    inner: httpx2.AsyncBaseTransport, on_lost: Callable[[str], None], idle: float | None
) -> httpx2.AsyncBaseTransport:
    """`inner`, whose GETs of an event stream are read with `idle` seconds (None: no limit)
    allowed between two bytes, and end as closed when they fail, `on_lost(why)` told first."""
    return _EventStreams(inner, on_lost, idle)


class _EventStreams(httpx2.AsyncBaseTransport):
    def __init__(
        self, inner: httpx2.AsyncBaseTransport, on_lost: Callable[[str], None], idle: float | None
    ) -> None:
        self._inner = inner
        self._on_lost = on_lost
        self._idle = idle

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        stream = request.method == "GET" and "text/event-stream" in request.headers.get(
            "accept", ""
        )
        if not stream:  # a message POSTed, or an authorization flow's request
            return await self._inner.handle_async_request(request)
        timeouts = {**request.extensions.get("timeout", {}), "read": self._idle}
        request.extensions = {**request.extensions, "timeout": timeouts}
        response = await self._inner.handle_async_request(request)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _EndingQuietly(response.stream, self._on_lost, self._idle)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _EndingQuietly(httpx2.AsyncByteStream):
    """An event stream whose failure ends it, `on_lost` told why."""

    def __init__(
        self, inner: httpx2.AsyncByteStream, on_lost: Callable[[str], None], idle: float | None
    ) -> None:
        self._inner = inner
        self._on_lost = on_lost
        self._idle = idle

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except httpx2.ReadTimeout:
            self._on_lost(f"the server sent nothing for {self._idle:g} s (sse_idle_timeout)")
        except httpx2.TransportError as exc:
            self._on_lost(f"the event stream failed ({describe_error(exc)})")

    async def aclose(self) -> None:
        await self._inner.aclose()
