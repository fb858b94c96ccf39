"""uvicorn's HTTP protocol, sending what a response writes in one turn of the event loop at once.

uvicorn writes a response's head as soon as the app starts it, and each body part as it
comes: an answer sent whole (a JSON body) leaves in two socket writes, and its client may wake
for each (bench/RESULTS.md, items 26 and 34). `OneWriteHttp` holds the writes made in one turn
of the event loop and sends them together when the turn ends: the usual answer in one write.
Order is kept, a part the app sends after an await goes out in its own turn, and what passes
64 kB goes at once, so that the transport's buffer still paces a large body.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["OneWriteHttp"]

_HOLD_BELOW = 64 * 1024
"""Writes held past this many bytes go out at once: the transport's own buffer then pauses
the app (uvicorn's flow control) as it did, rather than holding a large body here; and a
large body is not copied into a joined buffer (a gathered write sends it with the head)."""


class OneWriteHttp(HttpToolsProtocol):
    """uvicorn's httptools protocol on a transport that sends each turn's writes together."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not a subclass: asyncio.Transport's methods would shadow the transport's own.
        one_write = _OneWrite(transport, asyncio.get_running_loop())
        super().connection_made(cast(asyncio.Transport, one_write))


class _OneWrite:
    """A transport whose writes of one turn of the event loop leave together at its end."""

    __slots__ = ("_held", "_loop", "_size", "_transport")

    def __init__(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport: Any = transport
        self._loop = loop
        self._held: list[bytes] | None = None
        self._size = 0

    def write(self, data: bytes) -> None:
        if self._held is None:
            self._held = [data]
            self._size = len(data)
            self._loop.call_soon(self._flush)
        else:
            self._held.append(data)
            self._size += len(data)
        if self._size >= _HOLD_BELOW:
            self._flush()

    def _flush(self) -> None:
        held, self._held = self._held, None
        if held is None or self._transport.is_closing():
            return
        if len(held) == 1:
            self._transport.write(held[0])
        elif self._size < _HOLD_BELOW:
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
