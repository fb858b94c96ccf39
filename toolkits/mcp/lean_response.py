"""One kept-alive connection of the lean client (`lean_http`) and the answer read on it.

The connection is an asyncio protocol: llhttp (httptools, uvicorn's parser) frames each answer
in C as its bytes arrive, Content-Length, chunked (trailers skipped) or up to the end of the
connection, and the reader is woken once per batch of body pieces, not once per socket read
through a stream wrapper. Against an anyio byte stream and a framing loop in Python, that is
0.02-0.04 ms less of the gateway's CPU per call passed through (bench/RESULTS.md, item 28).

An answer the reader left unread is drained by the connection itself (its pieces dropped) for
up to `_DRAIN_SECONDS`, after which the connection closes: a chunked answer's last chunk often
comes a moment after the message the caller waited for, and the connection is worth keeping.
Errors are httpx2's: `RemoteProtocolError` for an answer that breaks HTTP/1.1 or ends early,
`ReadError`; `NothingArrived` wraps one when the connection failed before any byte of the
answer (the client may then retry a kept connection). asyncio only: the gateway runs on it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httptools
import httpx2

__all__ = ["Connection", "LeanResponse", "NothingArrived"]

_MAX_HEAD = 65_536
"""Longest response head we read."""
_MAX_BUFFERED = 1 << 20
"""Body bytes held for a reader that takes them piece by piece before the socket is paused."""
_DRAIN_SECONDS = 0.5
"""How long an answer left unread may take to end, to keep the connection."""
_NO_BODY = (204, 304)


class NothingArrived(Exception):
    """The connection failed before any byte of the answer (`error` says how)."""

    def __init__(self, error: httpx2.HTTPError) -> None:
        self.error = error


class LeanResponse:
    """One answer: status, headers (names lower-cased, repeats joined with ", ") and a body
    read as it arrives."""

    __slots__ = (
        "_conn",
        "_error",
        "_head",
        "_held",
        "_pieces",
        "_waiter",
        "_whole",
        "done",
        "headers",
        "status_code",
    )

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self._head = conn.loop.create_future()
        self._pieces: list[bytes] = []
        self._held = 0
        """Bytes in `_pieces`."""
        self._waiter: asyncio.Future[None] | None = None
        self._whole = False
        """The reader wants the whole body (`aread`): no pausing for it."""
        self._error: Exception | None = None
        """The read's failure: an httpx2 error, or `NothingArrived` before any byte."""
        self.done = False
        """The answer ended (read to its end, or failed)."""

    @property
    def unread(self) -> bool:
        """Whether the rest of the answer may still arrive and be drained to its end."""
        return not self.done and not self._conn.until_close

    async def read_head(self) -> None:
        await self._head

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while True:
            if self._pieces:
                pieces, self._pieces, self._held = self._pieces, [], 0
                self._conn.taken()
                for piece in pieces:
                    yield piece
            elif self._error is not None:
                raise self._error
            elif self.done:
                return
            else:
                await self._wait()

    async def aread(self) -> bytes:
        self._whole = True
        self._conn.taken()
        while not self.done:
            await self._wait()
        if self._error is not None:
            raise self._error
        pieces, self._pieces, self._held = self._pieces, [], 0
        return b"".join(pieces)

    async def _wait(self) -> None:
        waiter = self._waiter = self._conn.loop.create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    @property
    def held(self) -> int:
        """Body bytes held for a reader that takes them piece by piece (0 for `aread`)."""
        return 0 if self._whole else self._held

    def forget(self) -> None:
        """The reader left: what arrives from now on is dropped."""
        self._whole = False
        self._pieces.clear()
        self._held = 0

    # What the connection tells it.

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def headed(self, status: int, headers: dict[str, str]) -> None:
        self.status_code, self.headers = status, headers
        if not self._head.done():
            self._head.set_result(None)

    def add(self, piece: bytes) -> None:
        self._pieces.append(piece)
        self._held += len(piece)
        if not self._whole:  # `aread` wakes at the end only
            self._wake()

    def ended(self) -> None:
        self.done = True
        self._wake()

    def failed(self, error: httpx2.HTTPError, got_any: bool) -> None:
        if self.done:
            return
        self.done = True
        self._error = error if got_any else NothingArrived(error)
        if not self._head.done():
            self._head.set_exception(self._error)
        self._wake()


class _Refused(Exception):
    """An answer our callbacks refuse (raised through the parser; carries the error)."""

    def __init__(self, error: httpx2.HTTPError) -> None:
        self.error = error


class Connection(asyncio.Protocol):
    """A TCP connection to the server and the answer being read on it (`start`)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reusable = False
        """The last answer ended cleanly and the server keeps the connection open."""
        self.until_close = False
        """The answer being read ends with the connection (no length, not chunked)."""
        self.draining: asyncio.Future[bool] | None = None
        """Set while an answer left unread drains: True once it ended and the connection may
        carry another request."""
        self._parser = httptools.HttpResponseParser(self)
        self._response: LeanResponse | None = None
        self._headers: dict[str, str] = {}
        self._in_head = False
        self._head_bytes = 0
        self._got_any = False
        self._paused = False
        self._drain_timer: asyncio.TimerHandle | None = None

    def start(self, request: bytes) -> LeanResponse:
        """Send `request`; the answer to read."""
        response = self._response = LeanResponse(self)
        self.reusable = self.until_close = self._got_any = False
        self.draining = None
        self._headers, self._in_head, self._head_bytes = {}, True, 0
        if self.transport is None or self.closed or self.transport.is_closing():
            response.failed(httpx2.WriteError("the connection is closed"), False)
        else:
            self.transport.write(request)
        return response

    def drain(self) -> None:
        """The reader left: let the rest of the answer arrive (or close after a while)."""
        response = self._response
        if response is None or response.done:
            return
        response.forget()
        self.draining = self.loop.create_future()
        self._drain_timer = self.loop.call_later(_DRAIN_SECONDS, self.close)
        self._resume()

    def close(self, error: httpx2.HTTPError | None = None) -> None:
        """Close the connection; an answer being read fails with `error` (or a read error)."""
        if self.transport is not None:
            self.transport.abort()
        self._lost(error or httpx2.ReadError("the connection was closed"))

    def taken(self) -> None:
        """The reader took the pieces held for it."""
        self._resume()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's: no subclass

    def data_received(self, data: bytes) -> None:
        response = self._response
        if response is None or response.done:
            self.close()  # bytes nobody asked for: the connection's state is unknown
            return
        self._got_any = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.close(httpx2.RemoteProtocolError("the server switched protocols"))
            return
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__
            error = refused.error if isinstance(refused, _Refused) else None
            self.close(error or httpx2.RemoteProtocolError(f"answer not read: {exc!r}"))
            return
        except httptools.HttpParserError as exc:
            self.close(httpx2.RemoteProtocolError(f"not an HTTP/1.1 answer: {exc}"))
            return
        if self._in_head:
            self._head_bytes += len(data)
            if self._head_bytes > _MAX_HEAD:
                self.close(httpx2.RemoteProtocolError("the response head is too long"))
        elif response.held > _MAX_BUFFERED and self.draining is None and not self._paused:
            self._paused = True
            self.transport.pause_reading()  # type: ignore[union-attr]

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        response = self._response
        if exc is None and response is not None and not response.done and self.until_close:
            self._end(response)  # the end of the connection is the end of the answer
        said = "mid-answer" if self._got_any else "without answering"
        error: httpx2.HTTPError = (
            httpx2.ReadError(str(exc) or repr(exc))
            if exc is not None
            else httpx2.RemoteProtocolError(f"the server closed the connection {said}")
        )
        self._lost(error)

    # httptools' callbacks

    def on_message_begin(self) -> None:
        response = self._response
        if response is None or response.done:  # a second answer to one request
            raise _Refused(httpx2.RemoteProtocolError("the server answered what was not asked"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if not self._in_head:
            return  # a trailer
        key, text = name.decode("latin-1").lower(), value.decode("latin-1").strip(" \t")
        headers = self._headers
        headers[key] = f"{headers[key]}, {text}" if key in headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        headers = self._headers
        if 100 <= status < 200:
            if status == 101:
                raise _Refused(httpx2.RemoteProtocolError("the server switched protocols"))
            self._headers = {}  # an interim answer: the real one follows
            return
        if headers.get("content-encoding", "identity").lower() != "identity":
            raise _Refused(
                httpx2.RemoteProtocolError("the server encoded the body, which we did not ask for")
            )
        encoding = headers.get("transfer-encoding")
        if encoding is not None and encoding.lower() != "chunked":
            raise _Refused(
                httpx2.RemoteProtocolError(f"unsupported transfer-encoding {encoding!r}")
            )
        self._in_head = False
        self.until_close = (
            encoding is None and "content-length" not in headers and status not in _NO_BODY
        )
        parser = self._parser
        self.reusable = parser.get_http_version() == "1.1" and parser.should_keep_alive()
        assert self._response is not None
        self._response.headed(status, headers)

    def on_body(self, body: bytes) -> None:
        response = self._response
        if response is not None and self.draining is None:
            response.add(body)

    def on_message_complete(self) -> None:
        if self._in_head:
            return  # the end of an interim answer
        if self._response is not None:
            self._end(self._response)

    # the rest

    def _end(self, response: LeanResponse) -> None:
        response.ended()
        self._settle(self.reusable)  # llhttp keeps no connection whose end ends the answer

    def _lost(self, error: httpx2.HTTPError) -> None:
        self.closed = True
        self.reusable = False
        response = self._response
        if response is not None:
            response.failed(error, self._got_any)
        self._settle(False)

    def _settle(self, reusable: bool) -> None:
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        draining = self.draining
        if draining is not None and not draining.done():
            draining.set_result(reusable)
        if draining is not None and not reusable and not self.closed:
            self.close()

    def _resume(self) -> None:
        if self._paused and self.transport is not None and not self.closed:
            self._paused = False
            self.transport.resume_reading()
