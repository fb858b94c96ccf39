"""Connections to `serve --http`, bounded before any request is authenticated.

uvicorn (0.55, httptools) waits for a request's head with no deadline: a client that opens
connections and sends a header line every few seconds holds each one open for ever, with no
token, until the process runs out of file descriptors. Its `limit_concurrency` does not help:
it answers 503 only once a head is complete, and counts the held connections too, so the
real clients would be the ones refused. So each connection is watched here:

- Its request's head must arrive within `read_timeout` of the connection's opening (or of the
  request's first byte, on a kept-alive connection); and when the answer went out before the
  body came in (a 401 answered from the head), the rest of the body within `read_timeout` of
  the answer. Otherwise the connection is closed. A request being served (an open GET stream,
  a long call) has no deadline here.
- At most `max_connections` are open. One more closes the connection that has waited longest
  for a request (a head still coming in, or an idle kept-alive one); when every one is serving
  a request, the new connection is answered 503 and closed.

ConnectionLimits(max_connections, read_timeout).protocol()  -> uvicorn's `http` protocol class
raise_file_limit(max_connections)  -> the process may open that many, and some to spare
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections import OrderedDict
from typing import ClassVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_READ_TIMEOUT",
    "ConnectionLimits",
    "raise_file_limit",
]

DEFAULT_MAX_CONNECTIONS = 2048
"""Far above the clients one gateway serves (2025-era sessions hold one connection each for
their GET stream, at most `http_max_sessions` = 1000 by default, and one for their calls)."""
DEFAULT_READ_TIMEOUT = 30.0
"""Seconds for a request's head: a real client sends it in one go (nginx allows 60, Apache
20 to 40)."""
_WARN_EVERY = 60.0
_REFUSED_LINGER = 1.0
"""Seconds a refused connection stays open for its client to read the 503."""
_SPARE_FILES = 512
"""File descriptors beside the HTTP connections: MCP servers' pipes and connections, stores."""

_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 21\r\nconnection: close\r\n\r\nToo many connections\n"
)

log = logging.getLogger(__name__)


def raise_file_limit(max_connections: int) -> None:
    """Raise the process's soft limit on open files (up to its hard limit, as Go does) so that
    `max_connections` fit with some to spare; warn when they cannot."""
    needed = max_connections + _SPARE_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
    except (ValueError, OSError):
        raised = soft
    if raised < needed:
        log.warning(
            "the process may open %d files (ulimit -n), fewer than [gateway] "
            "http_max_connections = %d and %d for the rest: lower it, or raise the limit",
            raised,
            max_connections,
            _SPARE_FILES,
        )


class ConnectionLimits:
    """The open connections, and those waiting for a request, the longest waiting first."""

    def __init__(self, max_connections: int, read_timeout: float) -> None:
        self.max_connections = max_connections
        self.read_timeout = read_timeout
        self._open: set[_Guarded] = set()
        self._waiting: OrderedDict[_Guarded, None] = OrderedDict()
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
        """Count `connection` in, closing a waiting one to make room; False: no room."""
        while len(self._open) >= self.max_connections:
            if not self._waiting:
                self._warn("all serving requests: refusing new ones with 503")
                return False
            oldest, _ = self._waiting.popitem(last=False)
            self._warn("closing the ones waiting longest for a request")
            self.forget(oldest)
            oldest.transport.close()
        self._open.add(connection)
        self._waiting[connection] = None
        return True

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

    def waits(self, connection: _Guarded) -> None:
        if connection in self._open:
            self._waiting[connection] = None
            self._waiting.move_to_end(connection)

    def serves(self, connection: _Guarded) -> None:
        self._waiting.pop(connection, None)

    def forget(self, connection: _Guarded) -> None:
        self._open.discard(connection)
        self._waiting.pop(connection, None)


class _Guarded(HttpToolsProtocol):
    """uvicorn's httptools protocol with `ConnectionLimits`' deadline and cap."""

    _limits: ClassVar[ConnectionLimits]
    _read_timer: asyncio.TimerHandle | None = None
    _refused = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self._limits.admit(self):
            # Answered without reading the request: closing a socket with unread data resets
            # it, losing the answer; so end our side, and close once the client could read it.
            self._refused = True
            transport.write(_BUSY)
            if transport.can_write_eof():
                transport.write_eof()
            self._read_timer = self.loop.call_later(_REFUSED_LINGER, transport.close)
            return
        self._arm_read_timer()

    def data_received(self, data: bytes) -> None:
        if not self._refused:
            super().data_received(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self._limits.forget(self)
        self._cancel_read_timer()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._read_timer is None:  # a kept-alive connection's next request
            self._arm_read_timer()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._cancel_read_timer()
        self._limits.serves(self)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._cancel_read_timer()

    def on_response_complete(self) -> None:
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if pipelined or self.transport.is_closing():
            return
        self._limits.waits(self)
        if self.cycle.more_body:  # answered before its body came: the rest has a deadline
            self._arm_read_timer()

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(self._limits.read_timeout, self._read_too_slow)

    def _cancel_read_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_too_slow(self) -> None:
        self._read_timer = None
        cycle = cast("RequestResponseCycle | None", self.cycle)  # None before a first request
        if cycle is not None and not cycle.response_complete:
            return  # a pipelined head behind a request being served: bounded by that one
        log.debug("closing an HTTP connection: no request within %s s", self._limits.read_timeout)
        self.transport.close()
