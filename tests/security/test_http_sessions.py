"""2025-era HTTP sessions are bounded: an idle timeout, and a cap that closes the least
recently active idle session first. A closed session answers 404 (the spec's "start again").
The answer that opens one is JSON."""

from __future__ import annotations

import gc
import json
import logging
import weakref
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import CoroutineType
from typing import Any

import anyio
import httpx2
import pytest
from anyio import TaskInfo
from anyio.abc import TaskGroup
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.server import HttpOptions, http_app
from gateway.server.transports.draining import SESSION_CLOSED
from gateway.server.transports.http_sessions import SessionLimits
from tests.server.support import calculator_gateway, serve
from tests.servers.asgi import serve_on_loopback
from toolkits import FunctionToolkit, function_tool

from .wire import LEGACY, HttpWire, calculate, calculated, initialize

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class Hold:
    """A local tool that answers once the test releases it."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.release = anyio.Event()
        self.answered = anyio.Event()
        """Set once the client has read the status of `occupy`'s call."""

        async def hold() -> str:
            """Wait for the test."""
            self.started.set()
            await self.release.wait()
            return "released"

        self.node = FunctionToolkit("hold", [function_tool(hold)])

    async def occupy(self, wire: HttpWire, tg: TaskGroup) -> list[int]:
        """Call `hold` in `wire`'s session; returns once it runs. The list gets its status."""
        params: dict[str, Any] = {"name": "hold", "arguments": {}}
        call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        statuses: list[int] = []

        async def post() -> None:
            statuses.append((await wire.post(json.dumps(call).encode())).status)
            self.answered.set()

        tg.start_soon(post)
        await self.started.wait()
        return statuses


class HoldAccepted:
    """ASGI in front of the gateway: once `armed`, the 202 of a POSTed notification waits for
    `release` (the SDK answers one 202, then hands it to its session: where a DELETE may meet
    it); `deleting` is set when a DELETE comes in."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.armed = False
        self.accepted = anyio.Event()
        self.release = anyio.Event()
        self.deleting = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            self.deleting.set()
        if not self.armed or self.accepted.is_set() or scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def held(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 202:
                self.accepted.set()
                await self.release.wait()
            await send(message)

        await self.app(scope, receive, held)


@dataclass
class Gateway:
    url: str
    http: httpx2.AsyncClient
    sessions: SessionLimits
    front: HoldAccepted

    async def open(self) -> HttpWire:
        wire = HttpWire(self.http, self.url, LEGACY)
        await wire.open()
        assert wire.session_id is not None
        return wire

    async def status(self, wire: HttpWire) -> int:
        """The status of a calculator call in the session (404 once it is closed)."""
        answer = await wire.post(json.dumps(calculate(1, LEGACY)).encode())
        if answer.status == 200:
            assert calculated(answer.reply) == "42"
        return answer.status


@asynccontextmanager
async def gateway(
    hold: Hold, *, max_sessions: int = 1000, idle_timeout: float = 600
) -> AsyncGenerator[Gateway]:
    server = serve(calculator_gateway(nodes=[hold.node]), expose_tools=True)
    options = HttpOptions(
        "127.0.0.1", 0, max_sessions=max_sessions, session_idle_timeout=idle_timeout
    )
    app = http_app(server, options)
    sessions = app.state.sessions
    assert isinstance(sessions, SessionLimits)
    front = HoldAccepted(app)
    async with serve_on_loopback(front) as base, httpx2.AsyncClient(timeout=10) as http:
        yield Gateway(f"{base}/mcp", http, sessions, front)


async def test_the_answer_that_opens_a_session_is_json_and_so_is_a_lone_result() -> None:
    async with gateway(Hold()) as gw:
        with anyio.fail_after(30):
            headers = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
            }
            opened = await gw.http.post(gw.url, content=json.dumps(initialize(5)), headers=headers)
            assert opened.headers["content-type"] == "application/json"
            assert opened.json()["id"] == 5
            assert opened.json()["result"]["protocolVersion"] == LEGACY
            wire = HttpWire(gw.http, gw.url, LEGACY)
            wire.session_id = opened.headers["mcp-session-id"]
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await wire.post(json.dumps(done).encode())).status == 202
            answer = await gw.http.post(
                gw.url,
                content=json.dumps(calculate(6, LEGACY)),
                headers={**headers, "Mcp-Session-Id": wire.session_id},
            )
            # Nothing came before the result (progress would have: `json_answers`).
            assert answer.headers["content-type"] == "application/json"
            assert calculated(answer.json()) == "42"
            assert await gw.status(wire) == 200


async def test_a_full_gateway_closes_the_least_recently_active_idle_session() -> None:
    async with gateway(Hold(), max_sessions=3) as gw:
        with anyio.fail_after(30):
            a, b, c = [await gw.open() for _ in range(3)]
            assert await gw.status(a) == 200  # a is now the most recently active
            d = await gw.open()
            e = await gw.open()
            assert len(gw.sessions) == 3
            assert [await gw.status(w) for w in (a, b, c, d, e)] == [200, 404, 404, 200, 200]
            more = [await gw.open() for _ in range(20)]
            assert len(gw.sessions) == 3
            assert [await gw.status(w) for w in more[-3:]] == [200, 200, 200]
            assert await gw.status(a) == 404


async def test_a_busy_session_is_never_closed_to_make_room() -> None:
    hold = Hold()
    async with gateway(hold, max_sessions=1) as gw, anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            busy = await gw.open()
            answers = await hold.occupy(busy, tg)
            refused = await gw.http.post(
                gw.url,
                content=json.dumps(initialize(9)),
                headers={
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                },
            )
            assert refused.status_code == 503
            busy_error = {"code": -32603, "message": "Too many open sessions"}
            assert refused.json() == {"jsonrpc": "2.0", "id": 9, "error": busy_error}
            hold.release.set()
            await gw.sessions.wait_idle(busy.session_id or "")
            newer = await gw.open()
            await hold.answered.wait()  # the server is idle before its client has read it all
            assert answers == [200]
            assert [await gw.status(newer), await gw.status(busy)] == [200, 404]


async def test_idle_sessions_close_after_the_timeout_and_busy_ones_wait() -> None:
    hold = Hold()
    async with gateway(hold, idle_timeout=1.5) as gw, anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            busy = await gw.open()
            await hold.occupy(busy, tg)
            idle = await gw.open()
            await gw.sessions.wait_closed(idle.session_id or "")
            # Open longer than `idle`, but busy all along.
            assert len(gw.sessions) == 1
            assert await gw.status(idle) == 404
            hold.release.set()
            # The countdown starts when the last request ends.
            await gw.sessions.wait_closed(busy.session_id or "")
            assert len(gw.sessions) == 0
            assert await gw.status(busy) == 404


async def test_a_session_closed_as_the_server_stops_answers_503_not_404() -> None:
    """A request sent as the stopping server closes the sessions (its port closes up to
    0.1 s later) got 404, which tells its client to initialize again, against a server going
    away: it is told to call again once the gateway is back."""
    async with gateway(Hold()) as gw:
        with anyio.fail_after(30):
            wire = await gw.open()
            await gw.sessions.close_all()
            answer = await wire.post(json.dumps(calculate(1, LEGACY)).encode())
            deleted = await gw.http.delete(
                gw.url, headers={"Mcp-Session-Id": wire.session_id or ""}
            )
    assert answer.status == deleted.status_code == 503
    assert deleted.headers["retry-after"] == "1"
    assert answer.reply == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32000, "message": SESSION_CLOSED},
    }
    assert "Call again once the gateway is back" in SESSION_CLOSED


async def test_a_notification_that_meets_its_sessions_delete_goes_in_first_or_gets_404(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A client leaving just after cancelling a call sends its `notifications/cancelled` and
    # its DELETE at once. The SDK closed the session under one it had answered 202 and not yet
    # handed over: two ERROR tracebacks, and a 500 after the 202.
    hold = Hold()
    answered: dict[str, int] = {}
    called: list[int] = []
    async with gateway(hold) as gw, anyio.create_task_group() as tg:
        with anyio.fail_after(30):
            wire = await gw.open()
            called = await hold.occupy(wire, tg)
            cancel = {
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": 7, "reason": "leaving"},
            }

            async def post(key: str) -> None:
                answered[key] = (await wire.post(json.dumps(cancel).encode())).status

            async def delete() -> None:
                headers = {"Mcp-Session-Id": wire.session_id or "", "MCP-Protocol-Version": LEGACY}
                answered["delete"] = (await gw.http.delete(gw.url, headers=headers)).status_code

            gw.front.armed = True
            tg.start_soon(post, "cancel")
            await gw.front.accepted.wait()
            tg.start_soon(delete)
            await gw.front.deleting.wait()
            await anyio.wait_all_tasks_blocked()  # the DELETE waits (or, before, closed it)
            await post("late")
            gw.front.release.set()
    assert answered == {"late": 404, "cancel": 202, "delete": 200}
    assert called == [200]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_an_open_event_stream_keeps_no_frame_of_the_checks_it_passed() -> None:
    # An idle session holds its GET stream open as long as it lasts: a layer awaiting the
    # stream would keep its frame (and what the frame holds) for every idle session.
    async with gateway(Hold()) as gw:
        with anyio.fail_after(30):
            wire = await gw.open()
            headers = {
                "Accept": "text/event-stream",
                "MCP-Protocol-Version": LEGACY,
                "Mcp-Session-Id": wire.session_id or "",
            }
            async with gw.http.stream("GET", gw.url, headers=headers) as stream:
                assert stream.status_code == 200
                streaming = [
                    chain
                    for chain in map(_awaiting, anyio.get_running_tasks())
                    if any(name.endswith("._handle_get_request") for name in chain)
                ]
    assert len(streaming) == 1
    ours = [name for name in streaming[0] if name.startswith("gateway.")]
    # The app's own entry holds scope, receive and send only (in place of Starlette's frames).
    assert ours == [
        "gateway.server.transports.http.HttpApp.__call__",
        "gateway.server.transports.http_sessions.SessionLimits._serve_in_session",
    ]


async def test_an_open_session_keeps_nothing_of_the_connection_its_last_request_came_on() -> None:
    # The SDK keeps a session's last request, and the `receive` it was given, until the next
    # one; behind that `receive` is the server's connection (uvicorn's: transport, socket).
    app = http_app(serve(calculator_gateway(), expose_tools=True), HttpOptions("127.0.0.1", 0))
    body = json.dumps(initialize()).encode()
    headers = [
        (b"host", b"127.0.0.1:8000"),
        (b"accept", b"application/json, text/event-stream"),
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
    ]
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    statuses: list[int] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    async with app.running():
        with anyio.fail_after(30):
            connection = _Connection(body)
            ended = weakref.ref(connection)
            await app(scope, connection, send)
            del connection
            gc.collect()
            assert statuses == [200]
            assert len(app.state.sessions) == 1
            assert ended() is None


class _Connection:
    """The server's `receive` for one request: its body, then the end of the request."""

    def __init__(self, body: bytes) -> None:
        self.messages: list[Message] = [{"type": "http.request", "body": body}]

    async def __call__(self) -> Message:
        return self.messages.pop(0) if self.messages else {"type": "http.disconnect"}


def _awaiting(task: TaskInfo) -> list[str]:
    """The coroutines `task` is in, outermost first, as `module.qualname`."""
    names: list[str] = []
    coro: object = task.coro
    while isinstance(coro, CoroutineType) and coro.cr_frame is not None:
        frame = coro.cr_frame
        names.append(f"{frame.f_globals['__name__']}.{frame.f_code.co_qualname}")
        coro = coro.cr_await
    return names


async def test_a_refused_request_without_a_session_id_is_handed_no_session_id() -> None:
    """The SDK opens (and discards) a session for any request without an id: its refusal
    carried that session's id. The one opened by an `initialize` is the only one handed out."""
    async with gateway(Hold()) as gw:
        with anyio.fail_after(30):
            headers = {"Accept": "application/json, text/event-stream"}
            refused = [
                await gw.http.request(method, gw.url, headers=headers)
                for method in ("GET", "DELETE", "OPTIONS", "PUT")
            ]
            not_initialize = await gw.http.post(
                gw.url,
                content=json.dumps(calculate(1, LEGACY)),
                headers={**headers, "Content-Type": "application/json"},
            )
            opened = await gw.open()
            assert len(gw.sessions) == 1
    assert [r.status_code for r in refused] == [400, 400, 405, 405]
    assert not_initialize.status_code == 400
    assert [r.headers.get("mcp-session-id") for r in [*refused, not_initialize]] == [None] * 5
    assert opened.session_id is not None


async def test_a_failed_initialize_is_handed_no_session_and_keeps_none() -> None:
    """The SDK answers a failed `initialize` 200 with its JSON-RPC error: it carried a session
    id, and the session lived on (its requests refused 'Invalid request parameters'), holding
    one of `http_max_sessions`."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    failing = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize"},
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 5}},
    ]
    async with gateway(Hold(), max_sessions=1) as gw:
        with anyio.fail_after(30):
            failed = [
                await gw.http.post(gw.url, content=json.dumps(body), headers=headers)
                for body in failing
            ]
            assert len(gw.sessions) == 0
            opened = await gw.open()  # the one slot is free
            assert await gw.status(opened) == 200
    assert [(r.status_code, r.json()["id"], r.json()["error"]["code"]) for r in failed] == [
        (200, 0, -32602),
        (200, 1, -32602),
    ]
    assert [r.headers.get("mcp-session-id") for r in failed] == [None, None]
