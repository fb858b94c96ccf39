"""An SDK server over real HTTP whose front misbehaves as proxies and deploys do: a call (or
every request) answered with an error status or an HTML page, redirected, cut mid-answer, or
answered as the front makes up (`Fault.reply`).

`FaultyFront` is ASGI middleware around the SDK's streamable HTTP app. A `tools/call` of a tool
named in `calls` gets that fault instead of reaching the server; `everything`, when set, answers
every request; `moved` answers a request to `/mcp` with a 307 (`moved_status`: Django's
`APPEND_SLASH` and nginx answer 301) to `/mcp/`, where the server lives (as Starlette's slash
redirect does); `chain` redirects each of its paths to the next the same way (two proxies'
rules: `/mcp`, `/mcp/`, `/v2/mcp/`), the server living at the last. A fault's body may repeat
the request's target and headers, as a debug page or a proxy's does (`echo`). The server's `wait` tool holds each call until `release`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers.asgi import buffered_body

__all__ = ["CUT", "NGINX_502", "Fault", "FaultyFront", "Waiting", "faulty_server"]


@dataclass(frozen=True)
class Fault:
    """An HTTP answer: status, headers, body."""

    status: int
    content_type: str = "text/html"
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    echo: Callable[[dict[str, str]], bytes] | None = None
    """Makes the body of the request's headers (lower-cased names) and target (`:path`, as
    sent: `/mcp?api_key=KEY`), in place of `body`."""
    reply: Callable[[dict[str, Any]], bytes] | None = None
    """Makes the body of the JSON-RPC request answered (to answer it by its id), in place of
    `body`."""


CUT = Fault(200, "text/event-stream")
"""An event stream the server cuts (the connection closed) before any event."""

NGINX_502 = Fault(
    502,
    body=b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n",
)


@dataclass
class FaultyFront:
    app: ASGIApp
    calls: dict[str, Fault] = field(default_factory=dict[str, Fault])
    everything: Fault | None = None
    moved: bool = False
    """Requests to `/mcp` are redirected to `/mcp/` (`moved_status`), where the server answers."""
    moved_status: int = 307
    chain: tuple[str, ...] = ()
    """Each path but the last redirected to the next (`moved_status`); the server at the last.
    A path twice makes a loop."""
    methods: list[str] = field(default_factory=list[str])
    """The JSON-RPC methods POSTed, in order (what reached the server or its front)."""
    targets: list[tuple[str, str]] = field(default_factory=list[tuple[str, str]])
    """Each request's HTTP method and path, in order."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.everything is not None:
            await _answer(send, self.everything, scope)
            return
        path: str = scope["path"]
        self.targets.append((scope["method"], path))
        if path in self.chain[:-1]:
            where = (("location", self.chain[self.chain.index(path) + 1]),)
            await _answer(send, Fault(self.moved_status, "text/plain", headers=where), scope)
            return
        if self.chain and path == self.chain[-1]:
            scope = {**scope, "path": "/mcp", "raw_path": b"/mcp"}
        if self.moved:
            if path == "/mcp":
                where = (("location", "/mcp/"),)
                moved = Fault(self.moved_status, "text/plain", headers=where)
                await _answer(send, moved, scope)
                return
            if path == "/mcp/":
                scope = {**scope, "path": "/mcp", "raw_path": b"/mcp"}
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, receive = await buffered_body(receive)
        message: dict[str, Any] = json.loads(body) if body else {}
        method = message.get("method")
        self.methods.append(str(method))
        params: dict[str, Any] = message.get("params") or {}
        fault = self.calls.get(str(params.get("name"))) if method == "tools/call" else None
        if fault is None:
            await self.app(scope, receive, send)
        elif fault is CUT:
            await _start(send, fault)
            raise ConnectionAbortedError("cut mid-answer")  # uvicorn closes the connection
        else:
            if fault.reply is not None:
                fault = replace(fault, body=fault.reply(message))
            await _answer(send, fault, scope)


async def _start(send: Send, fault: Fault) -> None:
    headers = [(b"content-type", fault.content_type.encode())]
    headers += [(name.encode(), value.encode()) for name, value in fault.headers]
    await send({"type": "http.response.start", "status": fault.status, "headers": headers})


async def _answer(send: Send, fault: Fault, scope: Scope) -> None:
    body = fault.body
    if fault.echo is not None:
        sent: list[tuple[bytes, bytes]] = scope["headers"]
        query: bytes = scope["query_string"]
        target = scope["raw_path"] + (b"?" + query if query else b"")
        said = {name.decode().lower(): value.decode() for name, value in sent}
        body = fault.echo({":path": target.decode(), **said})
    await _start(send, fault)
    await send({"type": "http.response.body", "body": body})


@dataclass
class Waiting:
    """The `wait` tool's calls: how many began, and the event that lets them answer."""

    began: int = 0
    all_began: anyio.Event = field(default_factory=anyio.Event)
    release: anyio.Event = field(default_factory=anyio.Event)
    expected: int = 1


def faulty_server(waiting: Waiting, *faulty: str) -> MCPServer:
    """An SDK server with tools `ok`, `wait` (held until `waiting.release`) and, for each of
    `faulty`, a tool of that name (whose calls the front answers instead)."""
    server = MCPServer("faulty")

    @server.tool()
    def ok() -> str:
        return "ok"

    @server.tool()
    async def wait() -> str:
        waiting.began += 1
        if waiting.began >= waiting.expected:
            waiting.all_began.set()
        await waiting.release.wait()
        return "waited"

    for name in faulty:
        server.add_tool(lambda: "not reached", name=name)
    return server
