"""Serving an in-process SDK server over real HTTP on 127.0.0.1, and seeing what clients send."""

from __future__ import annotations

import socket
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["RecordHeaders", "serve_on_loopback"]


class RecordHeaders:
    """ASGI middleware keeping every HTTP request's headers (lower-cased names)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers: list[tuple[bytes, bytes]] = scope["headers"]
            self.seen.append({k.decode().lower(): v.decode() for k, v in headers})
        await self.app(scope, receive, send)


@asynccontextmanager
async def serve_on_loopback(app: Any, port: int = 0) -> AsyncGenerator[str]:
    """Serve `app` with uvicorn on 127.0.0.1 (`port`, or a free one); yields
    `http://127.0.0.1:PORT`."""
    # Bound and listening before uvicorn starts: clients can connect at once, no polling.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", port))
    sock.listen()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            try:
                yield f"http://127.0.0.1:{port}"
            finally:
                # Open SSE streams would hold a graceful shutdown: end them too.
                server.should_exit = server.force_exit = True
    finally:
        sock.close()
