"""Answers over HTTP as one JSON body, not an event stream, when nothing goes before the result.

The SDK answers each request on a 2025-era session with an event stream, and a 2026-07-28
request with one once its handler has run for 15 s. The SDK's own client (httpx2) refuses a
server-sent event over 1 MB ("SSE stream failed: Server-sent event exceeded the 1048576 byte
limit"), where it takes a JSON body of any size. `JsonAnswers` holds the SDK's event-stream
answer to a request:
- a list (the gateway serves each in one page: a `tools/list` of about 1,150 tools passed
  1 MB) has nothing to send before its result (no progress, no questions): it is held whole,
  and when it holds one message, that message goes as a JSON body;
- a tool call's answer (a resource read's, a prompt's) is held until something must go
  before its result (progress, a log message, a question to the client): from there on it
  streams as it came. The SDK's keep-alive ping after 15 s of silence begins a JSON body
  instead (its headers, then a newline at each ping: whitespace before the JSON, which JSON
  readers skip) when its client can be asked nothing on the call (a 2026-07-28 request; a
  2025-era session that declared no sampling, elicitation or roots): a notification after
  that is dropped, as `pass_through_reply` drops it. One that can be asked streams on at the
  ping, for a question would need the stream. A body begun ends at once with its answer, or
  with an error when its client cancels the call (`notifications/cancelled`): the SDK's
  stream of a cancelled call ends only as its session does, and a JSON body that comes as
  its client leaves raises out of the SDK client's `async with`. A result alone goes as a JSON body, as a call passed
  through answers (`pass_through_reply`): a 1 MB tool result reached SDK clients passed
  through but failed on this path, which takes the calls while their server reconnects (and
  every resource read and prompt). An error stays as the SDK
  wrote it (its answer to a cancelled call among them: a JSON body coming as the client
  leaves raised out of the SDK client's `async with`).
The client accepts JSON: the SDK refuses a POST that does not. Any other answer passes
unchanged (a `subscriptions/listen` stream, for one, starts at once).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Iterator

import anyio
from mcp_types import INTERNAL_ERROR
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkits import json_bytes, read_json

from ..request_checks import SERVED_WHOLE
from ..transports.envelope import posted_cancelled, posted_method, posted_request_id
from ..transports.request_headers import first
from .handshake_sessions import HandshakeSessions

__all__ = ["JsonAnswers", "only_message"]

log = logging.getLogger(__name__)

_SESSION_ID = b"mcp-session-id"
_ONE_RESULT = frozenset({"tools/call", "resources/read", "prompts/get"})
"""Requests whose answer is a result that may come after progress, logs or questions."""


class JsonAnswers:
    """ASGI: see the module docstring. `sessions`: the 2025-era sessions, whose clients may
    be asked questions; without them every client is taken to be one that may."""

    def __init__(self, app: ASGIApp, sessions: HandshakeSessions | None = None) -> None:
        self.app = app
        self._sessions = sessions
        self._begun: dict[tuple[bytes | None, object], _HeldResult] = {}
        """The JSON answers begun and not ended, by session id and request id."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] == "http":
            method = posted_method(scope)
            if method in SERVED_WHOLE:
                return self._serve(scope, receive, _Held(send))
            request_id = posted_request_id(scope)
            if method in _ONE_RESULT and request_id is not None:
                key = (first(scope, _SESSION_ID), request_id)
                held = _HeldResult(send, request_id, self._asks(scope), self._begun, key)
                return self._serve(scope, receive, held)
            if method == "notifications/cancelled" and self._begun:
                session = first(scope, _SESSION_ID)  # none: not a session's, nor begun
                begun = self._begun.get((session, posted_cancelled(scope)))
                if begun is not None and session is not None:
                    return self._cancel(begun, scope, receive, send)
        return self.app(scope, receive, send)  # no frame here while a stream is open

    def _asks(self, scope: Scope) -> bool:
        """Whether the client of a request may be asked a question on its answer."""
        if first(scope, _SESSION_ID) is None:
            return False  # a 2026-07-28 request: asked in input-required rounds, if at all
        if self._sessions is None:
            return True  # its session's capabilities are not known here
        session = self._sessions.find(scope)
        return session is not None and bool(session.answerable())

    async def _cancel(self, begun: _HeldResult, scope: Scope, receive: Receive, send: Send) -> None:
        await begun.cancelled()
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, held: _Held) -> None:
        try:
            await self.app(scope, receive, held)
            await held.finish()
        finally:
            held.forget()


class _Held:
    """A `send` holding an event-stream answer until it ends; any other passes at once."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._start: Message | None = None
        self._body: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and _is_event_stream(message):
            self._start = message
        elif message["type"] == "http.response.body" and self._start is not None:
            self._body.append(message.get("body", b""))
            if not message.get("more_body", False):
                await self.flush()
            elif self.must_go():
                await self._stream_on()
        else:
            await self._send(message)

    def must_go(self) -> bool:
        """Whether what is held must go now, as an event stream."""
        return False

    def json_message(self, stream: bytes) -> bytes | None:
        """The message a whole answer sends as a JSON body, if any."""
        return only_message(stream)

    async def finish(self) -> None:
        """The answer's app returned: send what is still held."""
        await self.flush()

    def forget(self) -> None:
        """The answer is over, however it ended."""

    async def flush(self) -> None:
        """Send what is held: as JSON if `json_message` says so, else as it came."""
        start, self._start = self._start, None
        if start is None:
            return
        stream = b"".join(self._body)
        self._body = []
        message = self.json_message(stream)
        if message is None:
            await self._send(start)
            await self._send({"type": "http.response.body", "body": stream})
            return
        headers: list[tuple[bytes, bytes]] = start.get("headers", [])
        json_headers = [
            (b"content-type", b"application/json"),
            *((k, v) for k, v in headers if k.lower() == _SESSION_ID),
            (b"content-length", b"%d" % len(message)),
        ]
        await self._send({"type": "http.response.start", "status": 200, "headers": json_headers})
        await self._send({"type": "http.response.body", "body": message})

    async def _stream_on(self) -> None:
        """Send what is held as it came, and pass the rest on as it comes."""
        start, self._start = self._start, None
        assert start is not None  # held
        stream = b"".join(self._body)
        self._body = []
        await self._send(start)
        await self._send({"type": "http.response.body", "body": stream, "more_body": True})


class _HeldResult(_Held):
    """Held until something must go before the result; a result alone goes as JSON, and
    silence is kept alive as JSON too for a client that can be asked nothing (`asks`)."""

    def __init__(
        self,
        send: Send,
        request_id: object,
        asks: bool,
        begun: dict[tuple[bytes | None, object], _HeldResult],
        key: tuple[bytes | None, object],
    ) -> None:
        """`begun`: where it is found under `key` while its JSON body is begun."""
        super().__init__(send)
        self._id = request_id
        self._asks = asks
        self._registry = begun
        self._key = key
        self._lock = anyio.Lock(fast_acquire=True)
        """Its writes and a cancellation's (from the task of the cancel's POST)."""
        self._judged = 0
        """The held events judged so far (each one once: a result may be megabytes)."""
        self._result: bytes | None = None
        self._goes = False
        self._pings = 0
        """Keep-alive pings judged and not yet sent on."""
        self._begun = False
        """Whether a JSON body was begun to keep silence alive."""
        self._done = False
        """Whether that body has ended."""

    async def __call__(self, message: Message) -> None:
        async with self._lock:
            if self._done:
                return  # answered as JSON: what the stream says after its answer has no reader
            await super().__call__(message)
            if self._start is None:
                return
            if self._begun and self._result is not None:
                await self._end(self._result)
            elif self._pings:
                await self._keep_alive()

    async def cancelled(self) -> None:
        """Its client cancelled the call: the body begun ends with an error, which the client
        drops (it waits on that id no longer)."""
        async with self._lock:
            if not self._done:
                await self._end(self._no_answer("the call was cancelled"))

    def must_go(self) -> bool:
        stream = b"".join(self._body)
        if stream.endswith(b"\r"):  # maybe half of a CRLF: the rest decides
            stream = stream[:-1]
        events = _complete_events(stream)
        for event in events[self._judged :]:
            self._judge(event)
        self._judged = len(events)
        return self._goes

    def json_message(self, stream: bytes) -> bytes | None:
        for event in _complete_events(stream)[self._judged :]:
            self._judge(event)
        return None if self._goes else self._result

    async def flush(self) -> None:
        if not self._begun:
            await super().flush()
            return
        if self._done:
            return
        message = self.json_message(b"".join(self._body))
        # Ended with no answer: the body ends as JSON all the same.
        await self._end(message or self._no_answer("the request ended without an answer"))

    async def finish(self) -> None:
        async with self._lock:
            await self.flush()

    def forget(self) -> None:
        if self._registry.get(self._key) is self:
            del self._registry[self._key]

    def _no_answer(self, why: str) -> bytes:
        error = {"code": INTERNAL_ERROR, "message": why}
        return json_bytes({"jsonrpc": "2.0", "id": self._id, "error": error})

    async def _end(self, message: bytes) -> None:
        self._done = True
        self._start = None
        self._body = []
        self.forget()
        await self._send({"type": "http.response.body", "body": message})

    async def _keep_alive(self) -> None:
        self._pings = 0
        if not self._begun:
            self._begun = True
            if self._key[0] is not None:  # on a session: its client may cancel by message
                self._registry[self._key] = self
            assert self._start is not None  # held
            headers: list[tuple[bytes, bytes]] = self._start.get("headers", [])
            json_headers = [
                (b"content-type", b"application/json"),
                *((k, v) for k, v in headers if k.lower() == _SESSION_ID),
            ]
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": json_headers}
            )
        await self._send({"type": "http.response.body", "body": b"\n", "more_body": True})

    def _judge(self, event: bytes) -> None:
        kind, data, comments = _read_event(event)
        if not data:  # no event, as a client reads it: a keep-alive ping must go, though
            if comments and (self._begun or not (self._asks or self._goes)):
                self._pings += 1  # kept alive as JSON
            else:
                self._goes = self._goes or comments
        elif kind == b"message" and self._result is None and _is_answer(data, self._begun):
            self._result = data
        elif self._begun:  # a notification: a JSON body can carry none
            log.debug("dropped an event of a JSON answer begun: %s", data[:80])
        else:
            self._goes = True


def _complete_events(stream: bytes) -> list[bytes]:
    """The events of `stream` that a blank line ended (its unfinished last one left out)."""
    return stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n")[:-1]


def _read_event(event: bytes) -> tuple[bytes, bytes, bool]:
    """An event's type, its data, and whether it had comment lines (a ping)."""
    kind = b"message"
    data: list[bytes] = []
    comments = False
    for line in event.split(b"\n"):
        if not line:
            continue
        if line.startswith(b":"):
            comments = True
            continue
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"event":
            kind = value
        elif name == b"data":
            data.append(value)
    return kind, b"\n".join(data), comments


def _is_answer(data: bytes, or_error: bool) -> bool:
    """Whether `data` is the request's result (or, `or_error`, its error)."""
    try:
        message = read_json(data)
    except ValueError:
        return False
    if not isinstance(message, dict) or "method" in message:
        return False
    return "result" in message or (or_error and "error" in message)


def _is_event_stream(start: Message) -> bool:
    if start["status"] != 200:
        return False
    headers: list[tuple[bytes, bytes]] = start.get("headers", [])
    return any(
        k.lower() == b"content-type" and v.lower().startswith(b"text/event-stream")
        for k, v in headers
    )


def _events(stream: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Each event's type and data; events without data (a priming event's id, comments such
    as the SDK's keep-alive pings) are no events, as a client reads them."""
    for event in stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n"):
        kind, data, _ = _read_event(event)
        if data:
            yield kind, data


def only_message(stream: bytes) -> bytes | None:
    """The data of the one `message` event of an event stream, or None if it holds another
    number of them or an event of another type. Comments (the SDK's keep-alive pings) and
    events without data (a priming event's id) are not messages."""
    found: bytes | None = None
    for kind, data in _events(stream):
        if kind != b"message" or found is not None:
            return None
        found = data
    return found
