"""Serving an in-process SDK server over real HTTP on 127.0.0.1, and seeing what clients send."""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator, Generator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RecordHeaders", "buffered_body", "serve_on_loopback"]


async def buffered_body(receive: Receive) -> tuple[bytes, Receive]:
    """A request's whole body, and a `receive` that gives it once more, then the connection's
    own messages (its disconnect): for middleware that reads a request before passing it on."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


class RecordHeaders:
    """ASGI middleware keeping every HTTP request's headers (lower-cased names) and method."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []
        self.methods: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers: list[tuple[bytes, bytes]] = scope["headers"]
            self.seen.append({k.decode().lower(): v.decode() for k, v in headers})
            self.methods.append(scope["method"])
        await self.app(scope, receive, send)


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers, as the gateway's server: Ctrl-C and SIGTERM
    stay pytest's and stop the run (uvicorn's would only stop this server, then re-raise the
    signal into the test, which failed and the run went on)."""

    @contextmanager
    def capture_signals(self) -> Generator[None]:
        yield


@asynccontextmanager
async def serve_on_loopback(
    app: Any, port: int = 0, *, certificate: str | None = None
) -> AsyncGenerator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (`port`, or a free one); yields
    `http://127.0.0.1:PORT`, or `https://` with `certificate` (a PEM file of the key and the
    certificate chain)."""
    # Bound and listening before uvicorn starts: clients can connect at once, no polling.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port chosen earlier
        sock.bind(("127.0.0.1", port))
        sock.listen()
    except OSError:
        sock.close()  # else a ResourceWarning fails whichever later test collects it
        raise
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on", ssl_certfile=certificate)
    server = _Uvicorn(config)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield f"{'https' if certificate else 'http'}://127.0.0.1:{port}"
            finally:
                # Open SSE streams would hold a graceful shutdown: end them too.
                server.should_exit = server.force_exit = True
    finally:
        sock.close()
