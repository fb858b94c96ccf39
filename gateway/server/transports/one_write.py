"""uvicorn's HTTP protocol, writing what a response sends in one turn of the event loop at once.

uvicorn writes a response's head as soon as the app starts it, and each body part as it
comes: an answer sent whole (a JSON body) leaves in two socket writes, and its client may wake
for each (bench/RESULTS.md, item 26). `OneWriteHttp` holds the writes made in one turn of the
event loop and sends them together at its end: one write for the usual answer, no later than
before. The head still goes first, and a part the app sends after an await goes in its turn.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttp"]

_JOIN_BELOW = 64 * 1024
"""Parts held together shorter than this are joined into one buffer; longer ones go out as
a list (a gathered write), so that a large body is not copied."""


class OneWriteHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol on a transport that sends each turn's writes together."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not a subclass: asyncio.Transport's methods would shadow the transport's own.
        one_write = _OneWrite(transport, asyncio.get_running_loop())
        super().connection_made(cast(asyncio.Transport, one_write))


class _OneWrite:
    """A transport whose writes of one turn of the event loop leave together at its end."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport: Any = transport
        self._loop = loop
        self._held: list[bytes] | None = None

    def write(self, data: bytes) -> None:
        if self._held is None:
            self._held = [data]
            self._loop.call_soon(self._flush)
        else:
            self._held.append(data)

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is None or self._transport.is_closing():
            return
        if len(held) == 1:
            self._transport.write(held[0])
        elif sum(map(len, held)) < _JOIN_BELOW:
            self._transport.write(b"".join(held))
        else:
            self._transport.writelines(held)

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:  # the rest is the transport's own
        return getattr(self._transport, name)
