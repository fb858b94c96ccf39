"""A list request answered over HTTP as one JSON body, not as an event stream, whatever its size.

The SDK answers each request on a 2025-era session with an event stream, and a 2026-07-28
request with one once its handler has run for 15 s. The SDK's own client (httpx2) refuses a
server-sent event over 1 MB: a `tools/list` of about 1,150 tools or more failed with "SSE
stream failed: Server-sent event exceeded the 1048576 byte limit" (the gateway serves its lists
in one page). A list has nothing to send before its result (no progress, no questions), so
`JsonLists` holds the SDK's event-stream answer to a list request and, when the stream holds
one message, sends that message as a JSON body instead (the client accepts JSON: the SDK
refuses a POST that does not). Any other answer passes unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..request_checks import SERVED_WHOLE
from ..transports.envelope import posted_method

__all__ = ["JsonLists", "only_message"]

_SESSION_ID = b"mcp-session-id"


class JsonLists:
    """ASGI: see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] == "http" and posted_method(scope) in SERVED_WHOLE:
            return self._serve(scope, receive, send)
        return self.app(scope, receive, send)  # no frame here while a stream is open

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        held = _Held(send)
        await self.app(scope, receive, held)
        await held.flush()


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
        else:
            await self._send(message)

    async def flush(self) -> None:
        """Send what is held: as JSON if it is one message, else as it came."""
        start, self._start = self._start, None
        if start is None:
            return
        stream = b"".join(self._body)
        self._body = []
        message = only_message(stream)
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


def _is_event_stream(start: Message) -> bool:
    if start["status"] != 200:
        return False
    headers: list[tuple[bytes, bytes]] = start.get("headers", [])
    return any(
        k.lower() == b"content-type" and v.lower().startswith(b"text/event-stream")
        for k, v in headers
    )


def only_message(stream: bytes) -> bytes | None:
    """The data of the one `message` event of an event stream, or None if it holds another
    number of them or an event of another type. Comments (the SDK's keep-alive pings) and
    events without data (a priming event's id) are not messages."""
    found: bytes | None = None
    for event in stream.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n\n"):
        kind = b"message"
        data: list[bytes] = []
        for line in event.split(b"\n"):
            if not line or line.startswith(b":"):
                continue
            name, _, value = line.partition(b":")
            value = value.removeprefix(b" ")
            if name == b"event":
                kind = value
            elif name == b"data":
                data.append(value)
        joined = b"\n".join(data)
        if not joined:  # no event, as a client reads it
            continue
        if kind != b"message" or found is not None:
            return None
        found = joined
    return found
