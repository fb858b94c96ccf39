"""An SDK server's streamable HTTP app that restarts in place, for tests of what clients do when
their sessions are forgotten.

`Restarting` is the ASGI app served (`serve_on_loopback`): it passes each request to the app
`make()` returned, whose lifespan (the SDK's session manager) it runs itself, and `restart()`
ends that app (its sessions end, and the connections of its requests still open are closed
unanswered, as a process's are when it dies) and serves a new one: a request carrying an old
session's id gets the SDK's 404. The port stays open, so no request meets a refused connection:
one that comes meanwhile waits for the new app (uvicorn logs the requests cut short). It keeps the
JSON-RPC method and HTTP status of every POST (`posts`). `event_stream`, when given, is the
status the GET of the server's event stream is answered with instead: 405 (the spec lets a
server offer none), so that only a request can find out that the server restarted; 404, as a
server with no GET route answers. `refuse(message)` may give the status (a 404) a POSTed
message is answered with instead of the app's answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from tests.servers.asgi import buffered_body

__all__ = ["Restarting"]


class Restarting:
    """See the module docstring. Run `run` in a task group (`await tg.start(app.run)`)."""

    def __init__(
        self,
        make: Callable[[], Starlette],
        *,
        event_stream: int | None = None,
        refuse: Callable[[dict[str, Any]], int | None] = lambda message: None,
    ) -> None:
        self._make = make
        self._event_stream = event_stream
        self._refuse = refuse
        self._app: Starlette | None = None
        self._up = anyio.Event()
        """Set while `_app` serves (a request waits on it meanwhile)."""
        self._restart = anyio.Event()
        self._restarted: anyio.Event | None = None
        self._open: set[anyio.CancelScope] = set()
        """The requests the app serves now."""
        self.posts: list[tuple[str, int]] = []
        """(JSON-RPC method, HTTP status) of each POST, in order."""
        self._posted = anyio.Event()

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve one app at a time until cancelled; started once the first is up."""
        started = False
        while True:
            app = self._make()
            async with app.router.lifespan_context(app):
                self._app = app
                self._up.set()
                if not started:
                    started = True
                    task_status.started()
                if self._restarted is not None:
                    self._restarted.set()
                await self._restart.wait()
                self._app, self._up, self._restart = None, anyio.Event(), anyio.Event()
                for request in self._open:
                    request.cancel()  # uvicorn closes its connection: it was cut short
                self._open = set()

    async def restart(self) -> None:
        """End the app (every session of it) and wait until a new one is up."""
        self._restarted = anyio.Event()
        self._restart.set()
        await self._restarted.wait()

    async def until(self, predicate: Callable[[list[tuple[str, int]]], bool]) -> None:
        """Wait until `predicate(posts)` holds (checked now and after every POST answered)."""
        while not predicate(self.posts):
            await self._posted.wait()

    def _post(self, method: str, status: int) -> None:
        self.posts.append((method, status))
        self._posted.set()
        self._posted = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # uvicorn's: the apps' own are run by `run`
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        while self._app is None:
            await self._up.wait()
        with anyio.CancelScope() as request:
            self._open.add(request)
            try:
                await self._serve(self._app, scope, receive, send)
            finally:
                self._open.discard(request)

    async def _serve(self, app: Starlette, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "GET" and self._event_stream is not None:
            status = self._event_stream
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body, receive = await buffered_body(receive)
        message: dict[str, Any] = json.loads(body) if body else {}
        method = str(message.get("method"))
        status = self._refuse(message)
        if status is not None:
            self._post(method, status)
            await send({"type": "http.response.start", "status": status, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            return

        async def seen(sent: Message) -> None:
            if sent["type"] == "http.response.start":
                self._post(method, sent["status"])
            await send(sent)

        await app(scope, receive, seen)
