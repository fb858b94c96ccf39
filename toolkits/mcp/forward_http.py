"""A passed-through request over streamable HTTP: the `Channel` of `forward`.

The request is POSTed on the node's live connection (its client, headers, auth and pooled
connections; its session id in the handshake era, or the 2026-07-28 envelope and routing
headers the node's SDK session stamps on every request of its own), and the answer read as it
streams: one JSON body, or one message per server-sent event. A 2026-07-28 request is
cancelled by closing its stream: that era has no notifications from client to server. Where
the link allows (`HttpLink.lean`), requests go out on the lean HTTP client (`lean_http`)
instead of httpx2's, which costs most of the CPU of a call passed through; a 401 or 403 it
gets did nothing at the server, so the request counts as not sent and the usual path runs the
authorization flow. The same holds on httpx2 when its flow gives up for want of someone to ask
(`AuthorizationRequired` before any answer: a step-up, or a grant gone): the usual path asks
the caller, or refuses saying why it could not.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, cast

import httpx2

from ..errors import AuthorizationRequired
from ..json_bytes import json_bytes, read_json
from .event_stream import EventData
from .forward import ChannelLost
from .lean_http import LeanHttp
from .server_requests import Stamp
from .session import Connection
from .transport import HttpLink

__all__ = ["HttpChannel"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]


@dataclass(frozen=True, slots=True)
class HttpChannel:
    """Requests of one node's streamable HTTP connection: a handshake-era session
    (`session_id`), or 2026-07-28 requests (`stamp`)."""

    node: str
    conn: Connection
    link: HttpLink
    client: httpx2.AsyncClient
    lean: LeanHttp | None
    """Sends the requests instead of `client` when set (`HttpLink.lean`)."""
    session_id: str | None
    protocol_version: str
    max_event_bytes: int
    stamp: Stamp | None = None
    """Set for a 2026-07-28 connection: what the SDK session adds to each request."""

    def exchange(
        self, request_id: str, request: JsonObject
    ) -> AbstractAsyncContextManager[AsyncIterator[JsonObject] | None]:
        del request_id  # the answer comes on the request's own response
        headers = self._headers()
        if self.stamp is not None:
            options: dict[str, Any] = {}
            self.stamp(request, options)
            stamped: dict[str, str] = options.get("headers", {})
            headers.update({name.lower(): value for name, value in stamped.items()})
        return _Exchange(self, self._request(json_bytes(request), headers))

    async def post(self, message: JsonObject) -> None:
        if self.stamp is not None:
            return  # 2026-07-28: a request is cancelled by closing its stream, as it was
        try:
            async with self._request(json_bytes(message), self._headers()) as response:
                await response.aread()
        except httpx2.HTTPError as exc:
            log.debug("MCP server %r: could not send %s: %s", self.node, message.get("method"), exc)

    def _request(
        self, body: bytes, headers: dict[str, str]
    ) -> AbstractAsyncContextManager[_Response]:
        if self.lean is not None:
            return self.lean.post(body, headers)
        return self.client.stream("POST", self.link.url, content=body, headers=headers)

    def _headers(self) -> dict[str, str]:
        headers = {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-protocol-version": self.protocol_version,
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        return headers


class _Response(Protocol):
    """What is read of a response: httpx2's, or the lean client's."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    async def aread(self) -> bytes: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


class _Exchange:
    """`HttpChannel.exchange`'s block. A class, as the lean client's is: a generator's block
    and an async generator of the messages cost ~90 bytecodes a call more (bench/RESULTS.md,
    item 36)."""

    __slots__ = ("_channel", "_messages", "_request", "_response")

    def __init__(
        self, channel: HttpChannel, request: AbstractAsyncContextManager[_Response]
    ) -> None:
        self._channel = channel
        self._request = request
        self._response: _Response | None = None
        """Set once the answer began: the block then ends the request."""
        self._messages: _Messages | None = None

    async def __aenter__(self) -> AsyncIterator[JsonObject] | None:
        try:
            response = self._response = await self._request.__aenter__()
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            return None  # not sent
        except httpx2.HTTPError as exc:
            raise ChannelLost from exc
        except AuthorizationRequired:
            return None  # refused before it was read: nobody here to ask for a grant
        channel = self._channel
        if response.status_code in (400, 404) and channel.session_id is not None:
            # The spec says 404 for a session the server no longer knows; servers built on the
            # TypeScript SDK's examples (server-everything) answer 400, e.g. after a restart.
            # Either way the request was refused unread: it goes again on a new session.
            channel.conn.drop(
                f"the server no longer knows the session (HTTP {response.status_code})"
            )
            return None
        if channel.lean is not None and response.status_code in (401, 403):
            return None  # refused unread: httpx2's auth flow answers on the usual path
        self._messages = _Messages(response, channel.max_event_bytes)
        return self._messages

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._response is None:
            return
        try:
            try:
                if self._messages is not None:
                    await self._messages.aclose()  # here, not by the event loop's finalizer
            finally:
                await self._request.__aexit__(kind, exc, tb)
        except httpx2.HTTPError as failed:
            raise ChannelLost from failed
        if isinstance(exc, httpx2.HTTPError):
            raise ChannelLost from exc


class _Messages:
    """The JSON-RPC messages of a response: one JSON body, or one per SSE event."""

    __slots__ = ("_events", "_pieces", "_ready", "_response")

    def __init__(self, response: _Response, max_event_bytes: int) -> None:
        self._response: _Response | None = response
        self._events: EventData | None = None
        if not response.headers.get("content-type", "").startswith("application/json"):
            self._events = EventData(max_event_bytes)
        self._pieces: AsyncIterator[bytes] | None = None
        self._ready: deque[bytes] = deque()
        """Events read but not yet taken."""

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> JsonObject:
        if self._events is None:  # one JSON body
            response, self._response = self._response, None
            if response is None:
                raise StopAsyncIteration
            return _object(await response.aread())
        while not self._ready:
            if self._pieces is None:
                if self._response is None:
                    raise StopAsyncIteration
                self._pieces = self._response.aiter_bytes()
            try:
                piece = await anext(self._pieces)
            except StopAsyncIteration:
                self._response = None
                await self.aclose()
                raise
            # An event without data primes a stream for resuming (SEP-1699): no message.
            self._ready.extend(data for data in self._events.feed(piece) if data)
        data = self._ready.popleft()
        try:
            return _object(data)
        except UnicodeDecodeError:  # as an event stream is read: not UTF-8 replaced
            return _object(data.decode("utf-8", "replace"))

    async def aclose(self) -> None:
        pieces, self._pieces = self._pieces, None
        if isinstance(pieces, AsyncGenerator):
            await pieces.aclose()


def _object(data: bytes | str) -> JsonObject:
    decoded = read_json(data)
    if not isinstance(decoded, dict):
        raise ValueError("the server sent a JSON-RPC message that is not an object")
    return cast(JsonObject, decoded)
