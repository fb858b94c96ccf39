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
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing, asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, cast

import httpx2

from ..errors import AuthorizationRequired
from ..json_bytes import json_bytes, read_json
from .event_stream import EventData
from .forward import ChannelLost
from .lean_http import LeanHttp
from .session import Connection
from .transport import HttpLink

__all__ = ["HttpChannel"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
Stamp = Callable[[JsonObject, Any], None]
"""The SDK session's stamp of a 2026-07-28 request: its `_meta` envelope, its headers."""


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

    @asynccontextmanager
    async def exchange(
        self, request_id: str, request: JsonObject
    ) -> AsyncGenerator[AsyncIterator[JsonObject] | None]:
        del request_id  # the answer comes on the request's own response
        headers = self._headers()
        if self.stamp is not None:
            options: dict[str, Any] = {}
            self.stamp(request, options)
            stamped: dict[str, str] = options.get("headers", {})
            headers.update({name.lower(): value for name, value in stamped.items()})
        entered = not_sent = False
        try:
            async with self._request(json_bytes(request), headers) as response:
                entered = True
                if response.status_code == 404 and self.session_id is not None:  # gone
                    self.conn.drop("the server ended the session")
                    yield None
                elif self.lean is not None and response.status_code in (401, 403):
                    yield None  # refused unread: httpx2's auth flow answers on the usual path
                else:
                    # Closed here, not by the event loop's finalizer (a task per call).
                    async with aclosing(_messages(response, self.max_event_bytes)) as messages:
                        yield messages
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            if entered:
                raise ChannelLost from exc
            not_sent = True
        except httpx2.HTTPError as exc:
            raise ChannelLost from exc
        except AuthorizationRequired:
            if entered:
                raise
            not_sent = True  # refused before it was read: nobody here to ask for a grant
        if not_sent:
            yield None

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


async def _messages(response: _Response, max_event_bytes: int) -> AsyncGenerator[JsonObject]:
    """The JSON-RPC messages of a response: one JSON body, or one per SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        yield _object(await response.aread())
        return
    events = EventData(max_event_bytes)
    pieces = response.aiter_bytes()
    try:
        async for piece in pieces:
            for data in events.feed(piece):
                try:
                    message = _object(data)
                except UnicodeDecodeError:  # as an event stream is read: not UTF-8 replaced
                    message = _object(data.decode("utf-8", "replace"))
                yield message
    finally:
        if isinstance(pieces, AsyncGenerator):  # closed here, not by the event loop's finalizer
            await pieces.aclose()


def _object(data: bytes | str) -> JsonObject:
    decoded = read_json(data)
    if not isinstance(decoded, dict):
        raise ValueError("the server sent a JSON-RPC message that is not an object")
    return cast(JsonObject, decoded)
