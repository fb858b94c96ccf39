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
An event stream the server closes before the answer, having sent an event `id`, is resumed as
the SDK client resumes it (MCP 2025-11-25, "Resumability and Redelivery"; SSE polling): a GET
with `Last-Event-ID`, after the server's `retry` (else a second), again each time it closes,
until the answer comes or the call's clock runs out; two GETs failing in a row end it.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, suppress
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Protocol, cast

import anyio
import httpx2
import mcp_types
from mcp.client.streamable_http import (  # the SDK's own words for a redirect not followed
    _unfollowed_redirect,  # pyright: ignore[reportPrivateUsage]
)
from mcp.shared._httpx_utils import stream_within_origin  # the SDK's own redirect rule

from ..errors import AuthorizationRequired
from ..json_bytes import json_bytes, read_json
from .connection import Connection
from .event_stream import AnswerTooLarge, EventData
from .forward import ChannelLost
from .http_refusal import FORGOTTEN, is_refusal, refusal_answer
from .lean_http import LeanHttp
from .server_requests import Stamp
from .transport import HttpLink

__all__ = ["HttpChannel"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
_REDIRECTS = (301, 302, 303, 307, 308)
_RETRY_MS = 1000
"""How long to wait before resuming a stream whose server said no `retry` (the SDK's wait)."""
_RESUME_ATTEMPTS = 2
"""How many GETs resuming a stream may fail in a row (the SDK client's count)."""


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
        headers = self._headers()
        if self.stamp is not None:
            options: dict[str, Any] = {}
            self.stamp(request, options)
            stamped: dict[str, str] = options.get("headers", {})
            headers.update({name.lower(): value for name, value in stamped.items()})
        body = json_bytes(request)
        return _Exchange(self, request_id, body, headers, self._request(body, headers))

    async def post(self, message: JsonObject) -> None:
        if self.stamp is not None:
            return  # 2026-07-28: a request is cancelled by closing its stream, as it was
        body, headers = json_bytes(message), self._headers()
        try:
            async with self._request(body, headers) as response:
                await response.aread()
                if response.status_code not in _REDIRECTS:
                    return
            async with self.followed(body, headers) as response:
                await response.aread()
        except httpx2.HTTPError as exc:
            log.debug("MCP server %r: could not send %s: %s", self.node, message.get("method"), exc)

    def _request(
        self, body: bytes, headers: dict[str, str]
    ) -> AbstractAsyncContextManager[_Response]:
        if self.lean is not None:
            return self.lean.post(body, headers)
        return self.client.stream("POST", self.link.url, content=body, headers=headers)

    def followed(
        self, body: bytes, headers: dict[str, str]
    ) -> AbstractAsyncContextManager[httpx2.Response]:
        """The request sent again on httpx2, following redirects within the URL's origin as
        the SDK's own requests do (a server at `/mcp` may live at `/mcp/`); a redirect
        elsewhere is answered as it is, and nothing is sent there."""
        return stream_within_origin(
            self.client, "POST", self.link.url, content=body, headers=headers
        )

    def resuming_headers(self, last_id: str) -> dict[str, str]:
        """The headers of a GET that resumes an event stream after the event `last_id`: those
        the SDK client sends (its session id, protocol version)."""
        headers = self._headers()
        headers["last-event-id"] = last_id
        return headers

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

    __slots__ = (
        "_body",
        "_channel",
        "_headers",
        "_messages",
        "_request",
        "_request_id",
        "_response",
    )

    def __init__(
        self,
        channel: HttpChannel,
        request_id: str,
        body: bytes,
        headers: dict[str, str],
        request: AbstractAsyncContextManager[_Response],
    ) -> None:
        self._channel = channel
        self._request_id = request_id
        self._body = body
        self._headers = headers
        self._request = request
        self._response: _Response | None = None
        """Set once the answer began: the block then ends the request."""
        self._messages: _Messages | _Said | None = None

    async def __aenter__(self) -> _Messages | _Said | None:
        try:  # as `_sent`, inline: this runs on every call
            response = self._response = await self._request.__aenter__()
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            return None  # not sent
        except httpx2.HTTPError as exc:
            raise ChannelLost from exc
        except AuthorizationRequired:
            return None  # refused before it was read: nobody here to ask for a grant
        content_type = response.headers.get("content-type", "")
        if response.status_code != 200:
            return await self._not_ok(response, content_type)
        channel = self._channel
        if content_type.startswith("application/json"):
            self._messages = _Messages(response, None, channel.max_event_bytes, channel)
        elif content_type.startswith("text/event-stream"):
            events = EventData(channel.max_event_bytes)
            self._messages = _Messages(response, events, 0, channel)
        else:
            return await self._not_ok(response, content_type)
        return self._messages

    async def _sent(self) -> _Response | None:
        """The answer's head; None if the request was not sent (or refused unread)."""
        try:
            self._response = await self._request.__aenter__()
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            return None  # not sent
        except httpx2.HTTPError as exc:
            raise ChannelLost from exc
        except AuthorizationRequired:
            return None  # refused before it was read: nobody here to ask for a grant
        return self._response

    async def _not_ok(self, response: _Response, content_type: str) -> _Messages | _Said | None:
        """The messages of an answer other than a 200 in JSON or an event stream: a refusal
        (`http_refusal`) answers this request alone; the connection stays."""
        channel = self._channel
        status = response.status_code
        if status in FORGOTTEN and channel.session_id is not None:
            # Refused unread: it goes again on a new session.
            channel.conn.forgotten(status)
            return None
        if channel.lean is not None and status in (401, 403):
            return None  # refused unread: httpx2's auth flow answers on the usual path
        if status in _REDIRECTS:
            return await self._redirected()
        if is_refusal(status, content_type):
            sent = channel.link.sent
            if isinstance(response, httpx2.Response):  # an auth flow's token is the request's
                sent = sent.with_authorization(response.request.headers.get("authorization"))
            said = await refusal_answer(
                channel.node, self._request_id, status, content_type, response.aiter_bytes(), sent
            )
            self._messages = _Said(said)
        else:  # another 2xx, or a content type in capitals
            json = content_type.lower().startswith("application/json")
            events = None if json else EventData(channel.max_event_bytes)
            self._messages = _Messages(response, events, channel.max_event_bytes, channel)
        return self._messages

    async def _redirected(self) -> _Messages | _Said | None:
        """The messages of the request sent again, following redirects as the SDK does."""
        await self._end()
        self._request = self._channel.followed(self._body, self._headers)
        response = await self._sent()
        if response is None:
            return None
        if response.status_code in _REDIRECTS:  # elsewhere, or too many: not followed
            assert isinstance(response, httpx2.Response)
            said = _unfollowed_redirect(response) or f"HTTP {response.status_code}"
            error = {"code": mcp_types.INVALID_REQUEST, "message": said}
            self._messages = _Said({"jsonrpc": "2.0", "id": self._request_id, "error": error})
            return self._messages
        return await self._not_ok(response, response.headers.get("content-type", ""))

    async def _end(self) -> None:
        """End the request sent, its answer unread: the block goes on with another."""
        if self._response is not None:
            self._response = None
            with suppress(httpx2.HTTPError):  # that answer is not wanted
                await self._request.__aexit__(None, None, None)

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


class _Said:
    """The one message a refusal answers its request with (`http_refusal`)."""

    __slots__ = ("_message",)

    def __init__(self, message: JsonObject) -> None:
        self._message: JsonObject | None = message

    def __aiter__(self) -> _Said:
        return self

    async def __anext__(self) -> JsonObject:
        message, self._message = self._message, None
        if message is None:
            raise StopAsyncIteration
        return message

    async def aclose(self) -> None:
        self._message = None


class _Messages:
    """The JSON-RPC messages of a response: one JSON body, or one per SSE event (and those of
    the GETs that resume an event stream the server closed)."""

    __slots__ = ("_channel", "_events", "_limit", "_pieces", "_ready", "_response", "_resumed")

    def __init__(
        self, response: _Response, events: EventData | None, limit: int, channel: HttpChannel
    ) -> None:
        """`events`: None for one JSON body of at most `limit` bytes, else the reader of an
        event stream's; `channel`: where a closed event stream is resumed."""
        self._response: _Response | None = response
        self._events = events
        self._limit = limit
        self._channel = channel
        self._pieces: AsyncIterator[bytes] | None = None
        self._ready: deque[bytes] = deque()
        """Events read but not yet taken."""
        self._resumed: AbstractAsyncContextManager[httpx2.Response] | None = None
        """The GET that resumes the event stream, if one does."""

    def __aiter__(self) -> _Messages:
        return self

    async def __anext__(self) -> JsonObject:
        events = self._events
        if events is None:  # one JSON body
            response, self._response = self._response, None
            if response is None:
                raise StopAsyncIteration
            length = response.headers.get("content-length")
            if length is None:  # chunked: counted as it comes
                return _object(await _counted(response, self._limit))
            if int(length) > self._limit:  # refused unread
                raise AnswerTooLarge(self._limit)
            return _object(await response.aread())  # one wake at its end
        while not self._ready:
            if self._pieces is None:
                if self._response is None:
                    raise StopAsyncIteration
                self._pieces = self._response.aiter_bytes()
            try:
                piece = await anext(self._pieces)
            except StopAsyncIteration:
                await self.aclose()
                if events.last_id is None:  # not resumable: the answer is not coming
                    self._response = None
                    raise
                self._response = await self._resume(events.last_id, events.retry)
                continue
            # An event without data primes a stream for resuming (SEP-1699): no message.
            self._ready.extend(data for data in events.feed(piece) if data)
        data = self._ready.popleft()
        try:
            return _object(data)
        except UnicodeDecodeError:  # as an event stream is read: not UTF-8 replaced
            return _object(data.decode("utf-8", "replace"))

    async def _resume(self, last_id: str, retry: int | None) -> httpx2.Response | None:
        """The event stream the server closed, resumed after `last_id` by a GET, `retry`
        milliseconds on (else `_RETRY_MS`); None when `_RESUME_ATTEMPTS` GETs in a row failed
        (the server gone, or its stream no longer resumable)."""
        channel = self._channel
        headers = channel.resuming_headers(last_id)
        for _ in range(_RESUME_ATTEMPTS):
            await anyio.sleep((_RETRY_MS if retry is None else retry) / 1000)
            resumed = stream_within_origin(channel.client, "GET", channel.link.url, headers=headers)
            try:
                response = await resumed.__aenter__()
            except httpx2.HTTPError as exc:
                log.debug("MCP server %r: could not resume a stream: %s", channel.node, exc)
                continue
            content_type = response.headers.get("content-type", "")
            if response.status_code == 200 and content_type.startswith("text/event-stream"):
                self._resumed = resumed
                return response
            log.debug(
                "MCP server %r: resuming a stream was answered HTTP %d (%s)",
                channel.node,
                response.status_code,
                content_type,
            )
            with suppress(httpx2.HTTPError):  # that answer is not wanted
                await resumed.__aexit__(None, None, None)
        return None

    async def aclose(self) -> None:
        pieces, self._pieces = self._pieces, None
        if isinstance(pieces, AsyncGenerator):
            await pieces.aclose()
        resumed, self._resumed = self._resumed, None
        if resumed is not None:
            with suppress(httpx2.HTTPError):  # what is left of it is not wanted
                await resumed.__aexit__(None, None, None)


async def _counted(response: _Response, limit: int) -> bytes:
    """A JSON answer's body without a length, counted as it comes: `AnswerTooLarge` past
    `limit` bytes, the rest left unread."""
    pieces: list[bytes] = []
    size = 0
    reading = response.aiter_bytes()
    try:
        async for piece in reading:
            size += len(piece)
            if size > limit:
                raise AnswerTooLarge(limit)
            pieces.append(piece)
    finally:
        if isinstance(reading, AsyncGenerator):
            await reading.aclose()
    return b"".join(pieces)


def _object(data: bytes | str) -> JsonObject:
    decoded = read_json(data)
    if not isinstance(decoded, dict):
        raise ValueError("the server sent a JSON-RPC message that is not an object")
    return cast(JsonObject, decoded)
