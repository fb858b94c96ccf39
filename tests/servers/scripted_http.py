"""An HTTP/1.1 server on 127.0.0.1 that answers with exact bytes, request by request: for
tests of clients at the level of connections (framing, reuse, a server closing its end)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field

import anyio
from anyio.abc import ByteStream, SocketAttribute

__all__ = ["CLOSE", "Answer", "Server", "ok", "scripted"]

CLOSE = None
"""In a script: the server closes the connection here."""

Answer = Sequence[bytes | None]
"""What the server does for one request: each piece is written (and read by the client before
the next one is written), or the connection is closed."""


@dataclass
class Server:
    answers: list[Answer]
    url: str = ""
    connections: int = 0
    requests: list[bytes] = field(default_factory=list[bytes])
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set when the server closed a connection."""

    async def handle(self, stream: ByteStream) -> None:
        self.connections += 1
        async with stream:
            buffer = b""
            while self.answers:
                request, buffer = await _read_request(stream, buffer)
                if request is None:
                    return
                self.requests.append(request)
                for piece in self.answers.pop(0):
                    if piece is None:  # CLOSE
                        await stream.aclose()
                        self.closed.set()
                        return
                    await stream.send(piece)
                    await anyio.wait_all_tasks_blocked()  # the client has read it
            with suppress(anyio.EndOfStream, anyio.BrokenResourceError):
                await stream.receive()  # until the client closes


async def _read_request(stream: ByteStream, buffer: bytes) -> tuple[bytes | None, bytes]:
    while b"\r\n\r\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None, b""
    head, _, rest = buffer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(rest) < length:
        rest += await stream.receive()
    return head + b"\r\n\r\n" + rest[:length], rest[length:]


@asynccontextmanager
async def scripted(*answers: Answer) -> AsyncGenerator[Server]:
    server = Server(list(answers))
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    server.url = f"http://127.0.0.1:{listener.extra(SocketAttribute.local_port)}/mcp?x=1"
    with anyio.fail_after(10):
        async with listener, anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, server.handle)
            yield server
            tg.cancel_scope.cancel()


def ok(body: bytes = b"", *headers: bytes) -> bytes:
    """A 200 answer with `body` and `headers` (each `name: value`)."""
    head = b"".join(h + b"\r\n" for h in headers)
    return b"HTTP/1.1 200 OK\r\n%scontent-length: %d\r\n\r\n%s" % (head, len(body), body)
