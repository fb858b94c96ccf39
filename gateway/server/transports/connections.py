"""Connections to `serve --http`, bounded before any request is authenticated.

uvicorn (0.55, httptools) waits for a request's head with no deadline: a client that opens
connections and sends a header line every few seconds holds each one open for ever, with no
token, until the process runs out of file descriptors. Its `limit_concurrency` does not help:
it answers 503 only once a head is complete, and counts the held connections too, so the
real clients would be the ones refused. So each connection is watched here:

- Its request's head must arrive within `read_timeout` of the connection's opening (or of the
  request's first byte, on a kept-alive connection), and its body within `read_timeout` of the
  head (a body that stalls is answered 408); when the answer went out before the body came in
  (a 401 answered from the head), the rest of the body within `read_timeout` of the answer.
  Otherwise the connection is closed (by a sweep every `read_timeout / 4`: a timer per request
  cost ~1 % of a passed-through call's CPU). A request being served once its body is whole (an
  open GET stream, a long call) has no deadline here.
- A request's head (its request line and headers) has at most `max_head_bytes` (64 KiB, as
  h11 and nginx allow): counted as it arrives, and the parser is never given more, so a head
  of 50 MB sent without a token costs nothing but the 431 that closes its connection
  (httptools has no limit of its own: uvicorn buffered the whole head, then answered 401).
- At most `max_connections` are open. One more closes the connection that has waited longest
  for a request (a head or a body still coming in, or an idle kept-alive one); when every one
  is serving a request, the new connection is answered 503 and closed.

ConnectionLimits(max_connections, read_timeout).protocol()  -> uvicorn's `http` protocol class
"""

from __future__ import annotations

import asyncio
import logging
import math
from typing import ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_HEAD_BYTES",
    "DEFAULT_READ_TIMEOUT",
    "ConnectionLimits",
]

DEFAULT_MAX_CONNECTIONS = 2048
"""Far above the clients one gateway serves (2025-era sessions hold one connection each for
their GET stream, at most `http_max_sessions` = 1000 by default, and one for their calls)."""
DEFAULT_READ_TIMEOUT = 30.0
"""Seconds for a request's head, and then for its body: a real client sends each in one go
(nginx allows 60 for each, Apache 20 to 40); a 4 MiB body (the most taken) in 30 s is 140 kB/s."""
DEFAULT_MAX_HEAD_BYTES = 64 * 1024
"""A head's bytes (request line and headers): real ones are a few kB (h11 allows 16 KiB)."""
_WARN_EVERY = 60.0
_REFUSED_LINGER = 1.0
"""Seconds a refused connection stays open for its client to read the 503."""


def _closing_answer(status: bytes, text: bytes) -> bytes:
    """A whole plain-text answer, written to the socket as the connection closes."""
    head = b"HTTP/1.1 %s\r\ncontent-type: text/plain; charset=utf-8\r\n" % status
    return head + b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(text), text)


_TIMED_OUT = _closing_answer(b"408 Request Timeout", b"The request's body did not come in time\n")
_BUSY = _closing_answer(b"503 Service Unavailable", b"Too many connections\n")
_HEAD_TOO_BIG = _closing_answer(
    b"431 Request Header Fields Too Large", b"The request's head is too large\n"
)

log = logging.getLogger(__name__)


class ConnectionLimits:
    """The open connections, each with when it began waiting for a request (see the module
    docstring). A request pays for two stamps (when its head begins, when it is answered), no
    timer: one sweep, `read_timeout / 4` apart while any connection is open, closes those
    whose head is late."""

    def __init__(
        self,
        max_connections: int,
        read_timeout: float,
        max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES,
    ) -> None:
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self.max_head_bytes = max_head_bytes
        self._open: set[_Guarded] = set()
        self._sweep: asyncio.TimerHandle | None = None
        self._warned_at: float | None = None

    def __len__(self) -> int:
        return len(self._open)

    def protocol(self) -> type[asyncio.Protocol]:
        """uvicorn's protocol class for this server's connections."""
        limits = self

        class Guarded(_Guarded):
            _limits = limits

        return Guarded

    def admit(self, connection: _Guarded) -> bool:
        """Count `connection` in, closing the one waiting longest for a request to make room;
        False: no room (every connection serves a request)."""
        while len(self._open) >= self.max_connections:
            oldest = min(
                (c for c in self._open if c.waiting_since is not None),
                key=_waiting_since,
                default=None,
            )
            if oldest is None:
                self._warn("all serving requests: refusing new ones with 503")
                return False
            self._warn("closing the ones waiting longest for a request")
            self.forget(oldest)
            oldest.transport.close()
        self._open.add(connection)
        if self._sweep is None:
            self._sweep = connection.loop.call_later(self.read_timeout / 4, self._swept)
        return True

    def forget(self, connection: _Guarded) -> None:
        self._open.discard(connection)

    def _swept(self) -> None:
        """Close the connections whose head (or the rest of a body answered early) is late."""
        self._sweep = None
        if not self._open:
            return
        loop = asyncio.get_running_loop()
        late = loop.time() - self.read_timeout
        for connection in [c for c in self._open if c.timed and _waiting_since(c) <= late]:
            connection.too_slow()
        self._sweep = loop.call_later(self.read_timeout / 4, self._swept)

    def _warn(self, what: str) -> None:
        now = asyncio.get_running_loop().time()
        if self._warned_at is None or now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            log.warning(
                "%d HTTP connections open, the most [gateway] http_max_connections allows: %s "
                "(logged at most once a minute)",
                len(self._open),
                what,
            )


def _waiting_since(connection: _Guarded) -> float:
    since = connection.waiting_since
    return since if since is not None else math.inf


class _Guarded(HttpToolsProtocol):
    """uvicorn's httptools protocol with `ConnectionLimits`' deadline and cap."""

    _limits: ClassVar[ConnectionLimits]
    waiting_since: float | None = None
    """When the connection began waiting for a request (None: one is being served)."""
    timed = False
    """Whether what it waits for has a deadline: a head begun (or due since the connection
    opened), a body, or the rest of a body answered early; not an idle kept-alive
    connection."""
    _refused = False
    head_bytes: int | None = 0
    """The bytes of the head coming in, so far (None: no head is coming in, a body is)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.waiting_since, self.timed = self.loop.time(), True
        if not self._limits.admit(self):
            self.waiting_since = None
            self._refuse(_BUSY)

    def _refuse(self, answer: bytes) -> None:
        """Answer without reading the request: closing a socket with unread data resets it,
        losing the answer; so end our side, and close once the client could read it."""
        self._refused = True
        self.transport.write(answer)
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.loop.call_later(_REFUSED_LINGER, self.transport.close)

    def data_received(self, data: bytes) -> None:
        limit = self._limits.max_head_bytes
        while data and not self._refused and not self.transport.is_closing():
            if self.head_bytes is None:  # a body: the parser takes it as it comes
                super().data_received(data)
                return
            # A head: the parser gets one byte past the limit at most, then it is refused.
            given, data = data[: limit + 1 - self.head_bytes], data[limit + 1 - self.head_bytes :]
            self.head_bytes += len(given)
            super().data_received(given)  # which may end the head (`on_headers_complete`)
            if self._head_over(limit):
                log.info("refusing an HTTP request: its head is over %d bytes", limit)
                self._refuse(_HEAD_TOO_BIG)

    def connection_lost(self, exc: Exception | None) -> None:
        self._limits.forget(self)
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self.timed:  # a kept-alive connection's next request: its head from now
            self.waiting_since, self.timed = self.loop.time(), True

    def _head_over(self, limit: int) -> bool:
        return self.head_bytes is not None and self.head_bytes > limit

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self.head_bytes = None
        # Its body (if any: `on_message_complete` follows at once if not) is due from now; one
        # queued behind a request being served is not read meanwhile.
        self.waiting_since = None if self.pipeline else self.loop.time()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self.head_bytes = 0  # the next request's, if one follows
        self.waiting_since, self.timed = None, False  # its body came whole

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if pipelined or self.transport.is_closing():
            if pipelined and not self.pipeline and self.cycle.more_body:
                # The last request queued is served now, its body still to come: read from now.
                self.waiting_since, self.timed = self.loop.time(), True
            return
        # Idle, or answered before its body came (a 401 from the head): the rest has a deadline.
        self.waiting_since, self.timed = self.loop.time(), self.cycle.more_body

    def too_slow(self) -> None:
        cycle = cast("RequestResponseCycle | None", self.cycle)  # None before a first request
        if cycle is None or cycle.response_complete:
            log.debug(
                "closing an HTTP connection: no request within %s s", self._limits.read_timeout
            )
        elif cycle.more_body:  # its body stalled: the app waits for it
            log.debug(
                "closing an HTTP connection: no request body within %s s", self._limits.read_timeout
            )
            if not cycle.response_started:
                # Written here: the app never answers a body that never came. Closing tells
                # it the client went away, and it answers nothing (`envelope`).
                self.transport.write(_TIMED_OUT)
        else:
            return  # a pipelined head behind a request being served: bounded by that one
        self.transport.close()
