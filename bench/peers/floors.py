"""Two reference fronts that do nothing but forward: how fast any Python hop could be here.

    python bench/peers/floors.py relay URL   # bytes both ways, no HTTP parsed (asyncio Protocol)
    python bench/peers/floors.py bare URL    # uvicorn + an ASGI app that POSTs the body on

`relay` is the floor of a hop in Python: a connection in, one out, the bytes copied on the
event loop. `bare` is the floor of an HTTP front on the stack ours uses (uvicorn on httptools,
uvloop, the lean client of `toolkits.mcp.lean_http`): it reads each POST, sends it on with its
headers and streams the answer back, checking, rewriting and limiting nothing (a GET gets 405,
which MCP clients take as "no stream"; a DELETE goes on, so that a session ends at the server:
sessions left open slow the downstream's 2025-era requests for every arm after). Neither is a proxy
anyone should run; each prints `READY` + its URL once it listens on 127.0.0.1. The relay is
written on asyncio's protocols, not anyio's streams, on purpose: a floor pays for nothing it
does not need (an anyio stream takes a trip through the loop after every write).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # run as a script

import httpx2  # noqa: E402
import uvicorn  # noqa: E402
import uvloop  # noqa: E402
from starlette.types import Receive, Scope, Send  # noqa: E402

from toolkits.mcp.lean_http import LeanHttp  # noqa: E402

READY = "bench-floor: serving on "
_HOP_HEADERS = {b"host", b"content-length", b"connection", b"accept-encoding", b"keep-alive"}
_ANSWER_HEADERS = ("content-type", "mcp-session-id")


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection: what it reads goes to `peer`, with back-pressure."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Pipe | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's: no subclass of it

    def data_received(self, data: bytes) -> None:
        assert self.peer is not None
        assert self.peer.transport is not None
        self.peer.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def pause_writing(self) -> None:  # our peer writes faster than this side drains
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()


def relay(upstream: str, sock: socket.socket) -> None:
    parts = urlsplit(upstream)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80

    connecting: set[asyncio.Task[None]] = set()  # the loop keeps weak references only

    class Accepted(_Pipe):
        def __init__(self) -> None:
            super().__init__()
            self.early: list[bytes] = []
            """What came before the other end was connected."""

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            task = asyncio.get_running_loop().create_task(self._connect())
            connecting.add(task)
            task.add_done_callback(connecting.discard)

        def data_received(self, data: bytes) -> None:
            if self.peer is None:
                self.early.append(data)
            else:
                super().data_received(data)

        def connection_lost(self, exc: Exception | None) -> None:
            self.transport = None  # gone before the other end was connected: see `_connect`
            super().connection_lost(exc)

        async def _connect(self) -> None:
            loop = asyncio.get_running_loop()
            try:
                _, outgoing = await loop.create_connection(_Pipe, host, port)
            except OSError:
                if self.transport is not None:
                    self.transport.close()
                return
            if self.transport is None:  # the client went meanwhile
                assert outgoing.transport is not None
                outgoing.transport.close()
                return
            outgoing.peer, self.peer = self, outgoing
            assert outgoing.transport is not None
            outgoing.transport.writelines(self.early)
            self.early.clear()

    async def serve() -> None:
        server = await asyncio.get_running_loop().create_server(Accepted, sock=sock)
        _ready(upstream, sock)
        await server.serve_forever()

    uvloop.run(serve())


def bare(upstream: str, sock: socket.socket) -> None:
    lean = LeanHttp(upstream, {})
    other = httpx2.AsyncClient(timeout=30)  # DELETEs only: one session end per session

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (event := (await receive())["type"].removeprefix("lifespan.")) != "shutdown":
                await send({"type": f"lifespan.{event}.complete"})
            await other.aclose()
            await send({"type": "lifespan.shutdown.complete"})
            return
        raw: list[tuple[bytes, bytes]] = scope["headers"]
        headers = {
            name.decode("latin-1"): value.decode("latin-1")
            for name, value in raw
            if name not in _HOP_HEADERS
        }
        if scope["method"] != "POST":
            status = 405
            if scope["method"] == "DELETE":
                status = (await other.delete(upstream, headers=headers)).status_code
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        body = bytearray()
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        async with lean.post(bytes(body), headers) as answer:
            passed = [
                (name.encode(), answer.headers[name].encode())
                for name in _ANSWER_HEADERS
                if name in answer.headers
            ]
            start = {"type": "http.response.start", "status": answer.status_code}
            await send({**start, "headers": passed})
            async for chunk in answer.aiter_bytes():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        proxy_headers=False,
        timeout_keep_alive=120,  # as agent-gateway's (bench/RESULTS.md, item 56)
    )
    server = uvicorn.Server(config)

    async def serve() -> None:
        _ready(upstream, sock)
        await server.serve(sockets=[sock])

    uvloop.run(serve())


def _ready(upstream: str, sock: socket.socket) -> None:
    port = sock.getsockname()[1]
    path = urlsplit(upstream).path or "/"
    print(f"{READY}http://127.0.0.1:{port}{path}", file=sys.stderr, flush=True)


def main() -> None:
    kind, upstream = sys.argv[1:3]
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    {"relay": relay, "bare": bare}[kind](upstream, sock)


if __name__ == "__main__":
    main()
