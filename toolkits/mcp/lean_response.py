"""Reading one HTTP/1.1 answer for the lean client (`lean_http`): its head, then its body
framed by Content-Length, chunked transfer coding (trailers skipped) or the end of the
connection, piece by piece as it arrives.

The framing state lives on the response, not in a generator, so that whatever the reader
left unread can still be drained to the end (and the connection kept). Errors are httpx2's:
`RemoteProtocolError` for an answer that breaks HTTP/1.1 or ends early, `ReadError`,
`WriteError`; `NothingArrived` wraps one when the connection failed before any byte of the
answer (the client may then retry a kept connection).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import httpx2
from anyio.abc import ByteStream

__all__ = ["LeanResponse", "NothingArrived"]

_MAX_HEAD = 65_536
"""Longest response head (or chunk-size line) we read."""
_READ_SIZE = 262_144
_DRAIN_SECONDS = 0.5
"""How long finishing a response may read its unread rest, to keep the connection."""
_NO_BODY = (204, 304)


class NothingArrived(Exception):
    """The connection failed before any byte of the answer (`error` says how)."""

    def __init__(self, error: httpx2.HTTPError) -> None:
        self.error = error


class LeanResponse:
    """One answer: status, headers (names lower-cased) and a body read as it arrives."""

    def __init__(self, stream: ByteStream) -> None:
        self.stream = stream
        self._buffer = b""
        self._got_any = False
        self.status_code = 0
        self.headers: dict[str, str] = {}
        self._framing = ""  # "length", "chunked" (where in it: `_chunk`) or "close"
        self._remaining = 0
        self._chunk = "size"  # "size", "data", "crlf" or "trailers"
        self._done = False
        self._reusable = False

    async def send(self, request: bytes) -> None:
        try:
            await self.stream.send(request)
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise NothingArrived(httpx2.WriteError(str(exc) or repr(exc))) from exc

    async def read_head(self) -> None:
        while True:  # past interim (1xx) answers
            while (end := self._buffer.find(b"\r\n\r\n")) < 0:
                if len(self._buffer) > _MAX_HEAD:
                    raise httpx2.RemoteProtocolError("the response head is too long")
                self._buffer += await self._receive()
            head, self._buffer = self._buffer[:end], self._buffer[end + 4 :]
            version, self.status_code, self.headers = _parse_head(head)
            if not 100 <= self.status_code < 200:
                break
            if self.status_code == 101:
                raise httpx2.RemoteProtocolError("the server switched protocols")
        if self.headers.get("content-encoding", "identity").lower() != "identity":
            raise httpx2.RemoteProtocolError(
                "the server encoded the body, which we did not ask for"
            )
        closes = "close" in self.headers.get("connection", "").lower()
        self._reusable = version == "HTTP/1.1" and not closes
        encoding = self.headers.get("transfer-encoding")
        length = self.headers.get("content-length")
        if self.status_code in _NO_BODY:
            self._framing, self._done = "length", True
        elif encoding is not None:
            if encoding.lower() != "chunked":
                raise httpx2.RemoteProtocolError(f"unsupported transfer-encoding {encoding!r}")
            self._framing = "chunked"
        elif length is not None:
            if not length.isdigit():
                raise httpx2.RemoteProtocolError(f"bad content-length {length!r}")
            self._framing, self._remaining = "length", int(length)
            self._done = self._remaining == 0
        else:
            self._framing, self._reusable = "close", False

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        while data := await self._read():
            yield data

    async def aread(self) -> bytes:
        return b"".join([data async for data in self.aiter_bytes()])

    @property
    def unread(self) -> bool:
        """Whether the rest of the answer may still be read to its end (`finish`)."""
        return not self._done and self._framing != "close"

    @property
    def reusable(self) -> bool:
        """Whether the answer was read to its end and the connection may carry another."""
        return self._done and self._reusable and not self._buffer

    async def finish(self) -> bool:
        """Whether the connection may carry the next request: the answer was read to its end,
        now or within a short drain of its unread rest, and nothing followed it."""
        if self.unread:
            with anyio.move_on_after(_DRAIN_SECONDS):
                try:
                    while await self._read():
                        pass
                except httpx2.HTTPError:
                    return False
        return self.reusable

    async def _read(self) -> bytes:
        """The next piece of the body; b"" at its end."""
        if self._done:
            return b""
        if self._framing == "close":
            data = await self._take(_READ_SIZE, eof_ends=True)
            self._done = not data
            return data
        if self._framing == "length":
            data = await self._take(self._remaining)
            self._remaining -= len(data)
            self._done = self._remaining == 0
            return data
        while True:  # chunked
            if self._chunk == "data":
                data = await self._take(self._remaining)
                self._remaining -= len(data)
                if not self._remaining:
                    self._chunk = "crlf"
                return data
            line = await self._line()
            if self._chunk == "size":
                size = line.split(b";", 1)[0].strip()
                try:
                    self._remaining = int(size, 16)
                except ValueError:
                    raise httpx2.RemoteProtocolError(f"bad chunk size {size!r}") from None
                self._chunk = "data" if self._remaining else "trailers"
            elif self._chunk == "crlf":
                if line:
                    raise httpx2.RemoteProtocolError("a chunk is longer than its size")
                self._chunk = "size"
            elif not line:  # the empty line that ends the trailers
                self._done = True
                return b""

    async def _take(self, most: int, *, eof_ends: bool = False) -> bytes:
        """Up to `most` bytes, buffered ones first; b"" at the end of the stream if `eof_ends`."""
        if self._buffer:
            data, self._buffer = self._buffer[:most], self._buffer[most:]
            return data
        return await self._receive(min(most, _READ_SIZE), eof_ends=eof_ends)

    async def _line(self) -> bytes:
        """One CRLF-ended line of chunked framing, without its CRLF."""
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD:
                raise httpx2.RemoteProtocolError("a chunk line is too long")
            self._buffer += await self._receive()
        line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
        return line

    async def _receive(self, most: int = _READ_SIZE, *, eof_ends: bool = False) -> bytes:
        error: httpx2.HTTPError
        try:
            data = await self.stream.receive(most)
        except anyio.EndOfStream as exc:
            if eof_ends:
                return b""
            said = "mid-answer" if self._got_any else "without answering"
            error, cause = (
                httpx2.RemoteProtocolError(f"the server closed the connection {said}"),
                exc,
            )
        except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            error, cause = httpx2.ReadError(str(exc) or repr(exc)), exc
        else:
            self._got_any = True
            return data
        if not self._got_any:
            raise NothingArrived(error) from cause
        raise error from cause


def _parse_head(head: bytes) -> tuple[str, int, dict[str, str]]:
    """Version, status code and headers (names lower-cased, repeats joined with ", ")."""
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, _, rest = status_line.partition(" ")
    code = rest[:3]
    if version not in ("HTTP/1.1", "HTTP/1.0") or not code.isdigit() or rest[3:4] not in ("", " "):
        raise httpx2.RemoteProtocolError(f"not an HTTP/1.1 status line: {status_line[:100]!r}")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        if not colon or not name or name != name.strip():
            raise httpx2.RemoteProtocolError(f"malformed header line: {line[:100]!r}")
        name, value = name.lower(), value.strip(" \t")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return version, int(code), headers
