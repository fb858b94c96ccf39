"""2025-era HTTP sessions, bounded: an idle timeout and a cap, the oldest idle evicted first.

Each `initialize` over HTTP opens a session the SDK keeps (~36 KB each) until the client
deletes it; a client that just goes away leaves it behind. `SessionLimits` wraps the SDK's
endpoint and tracks each session's requests in flight (an open GET stream is one) and when
the last one ended. A session idle for `idle_timeout` is closed; opening one more than
`max_sessions` closes the least recently active idle session first, and when every session
is busy the new one is refused with 503. A closed session answers 404, which tells its
client to initialize again (the spec's rule).

Closing is the DELETE the client never sent, made to the SDK's endpoint as the session's
owner: the one way the SDK (mcp 2.3.0) offers to end a session from outside. The owner is
compared as the SDK compares it (`authorization_context`), so a request with another
credential's session id is left to the SDK to refuse and never counts for the session.

At shutdown (`close_all`) a session without calls in flight (an open GET stream is not one)
closes at once; one with calls is closed once they end, within the grace the server gives.
From then on a request on a session that is not open gets 503 (`draining.SESSION_CLOSED`),
not 404: its client would initialize again, against a server going away.

A client's DELETE waits for the session's POSTs of a notification or an answer in flight (the
SDK answers one 202, then hands it to the session: closed meanwhile, it logged two ERROR
tracebacks, and answered 500 after the 202); a request that comes once a DELETE is under way
gets 404, as the closed session would answer it. A client that leaves just after cancelling a
call sends both at once (its `notifications/cancelled`, then its DELETE).
"""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Awaitable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkits import in_background

from .draining import SESSION_CLOSED, refuse_unavailable
from .envelope import (
    duplicate_id,
    negotiated_version,
    other_version,
    posted_request_id,
    refuse,
)
from .request_headers import first

__all__ = ["DEFAULT_IDLE_TIMEOUT", "DEFAULT_MAX_SESSIONS", "SessionLimits"]

DEFAULT_IDLE_TIMEOUT = 600.0
"""Ten minutes: longer than any pause between a person's prompts that keeps the client's
session, short enough that abandoned ones go in minutes, not the SDK's half hour. A client
that was closed re-initializes in one round trip."""
_HANDING_GRACE = 5.0
"""Seconds a DELETE waits for the notifications in flight on its session: the SDK hands one
over at once, unless its session's message loop is stuck."""
DEFAULT_MAX_SESSIONS = 1000
"""About 40 MB of sessions at most (2,000 abandoned sessions added 72 MB uncapped); far above
the clients one gateway serves, far below what hurts a small host."""

_SESSION_ID = b"mcp-session-id"
_VERSION = MCP_PROTOCOL_VERSION_HEADER.encode()

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Session:
    owner: AuthorizationContext | None
    user: Any
    """The opening request's `scope["user"]`, for the DELETE made in its name."""
    last_active: float
    in_flight: int = 1
    calls: int = 1
    """Requests in flight other than GET streams (the opening request is one)."""
    ids: set[str] | None = None
    """The ids of the requests in flight, as the SDK keys their answer streams (`str(id)`: 5
    and "5" are one); made for the first."""
    idle: anyio.Event | None = None
    """Set once no request is in flight; made for a `wait_idle` only (an event is ~0.8 kB)."""
    closed: anyio.Event | None = None
    """Set once the session is closed; made for a `wait_closed` only."""
    handing: int = 0
    """POSTs of a notification or an answer in flight, which the SDK hands to the session."""
    handed: anyio.Event | None = None
    """Set once none is in flight; made for a DELETE waiting for them."""
    closing: bool = False
    """Its client's DELETE is under way: later requests get 404."""
    version: str | None = None
    """The protocol version it opened at, which each of its requests' header must name."""

    def take_id(self, key: str) -> bool:
        """Note a request id in flight; False if one with that id already is. The SDK keys
        each request's answer stream by its id: a second request with the id would take the
        first one's stream, leaving one of them unanswered for ever."""
        if self.ids is None:
            self.ids = set()
        elif key in self.ids:
            return False
        self.ids.add(key)
        return True


class _Status:
    """`send` noting the response's status (0 until it starts); the request id `key` is no
    longer in flight on `session` once the answer's last byte is sent (its client may use it
    again as soon as it has read them)."""

    __slots__ = ("_send", "key", "session", "status")

    def __init__(self, send: Send, session: _Session, key: str | None) -> None:
        self._send = send
        self.status = 0
        self.session = session
        self.key = key

    async def __call__(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.response.start" and not self.status:
            self.status = message["status"]
        elif self.key is not None and kind == "http.response.body" and not message.get("more_body"):
            self.release()
        await self._send(message)

    def release(self) -> None:
        if self.key is not None and self.session.ids is not None:
            self.session.ids.discard(self.key)
            self.key = None


class SessionLimits:
    """ASGI wrapper around the SDK's stateful endpoint; `running()` runs its idle timer."""

    def __init__(self, app: ASGIApp, *, max_sessions: int, idle_timeout: float) -> None:
        self.app = app
        self.max_sessions = max_sessions
        self.idle_timeout = idle_timeout
        self._sessions: OrderedDict[str, _Session] = OrderedDict()
        """Open sessions, the least recently active first."""
        self._opening = 0
        self._lock = anyio.Lock()
        self._wake = anyio.Event()
        self._timer_waits = False
        self._calls_ended: anyio.Event | None = None
        """Set when a session's last call ends, while `close_all` waits for that."""
        self._shut = False
        """`close_all` began: the server is going away."""

    def __len__(self) -> int:
        return len(self._sessions)

    async def wait_idle(self, session_id: str) -> None:
        """Return once the session has no request in flight (at once if it is not open)."""
        session = self._sessions.get(session_id)
        if session is not None and session.in_flight:
            if session.idle is None:
                session.idle = anyio.Event()
            await session.idle.wait()

    async def wait_closed(self, session_id: str) -> None:
        """Return once the session is closed (at once if it is not open)."""
        session = self._sessions.get(session_id)
        if session is not None:
            if session.closed is None:
                session.closed = anyio.Event()
            await session.closed.wait()

    async def close_all(self, grace: float = 0) -> None:
        """Close every session as its client's DELETE would, ending its event streams: the
        server is going away, and uvicorn waits for open streams before it shuts down.

        A session with calls in flight is closed once they end, or after `grace` seconds:
        closing it would end their event streams without an answer.
        """
        self._shut = True
        with anyio.move_on_after(grace):
            while True:
                ended = self._calls_ended = anyio.Event()
                async with self._lock:
                    for session_id, session in list(self._sessions.items()):
                        if not session.calls:
                            log.info("closing HTTP session %s: shutting down", session_id[:8])
                            await self._close(session_id)
                if not self._sessions:
                    break
                await ended.wait()
        self._calls_ended = None
        async with self._lock:
            for session_id in list(self._sessions):
                log.info("closing HTTP session %s: shutting down, calls cut off", session_id[:8])
                await self._close(session_id)

    def running(self) -> AbstractAsyncContextManager[TaskGroup]:
        """Closes idle sessions while the block runs."""
        return in_background(self._close_idle_sessions, wait_started=False)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http":
            return self.app(scope, receive, send)
        raw_id = first(scope, _SESSION_ID)
        if raw_id is not None:
            session_id = raw_id.decode("latin-1")
            session = self._sessions.get(session_id)
            if session is not None and session.owner == _owner(scope):
                return self._serve_in_session(session_id, session, scope, receive, send)
            if session is None and self._shut:
                return refuse_unavailable(send, SESSION_CLOSED)
        elif scope["method"] == "POST" and _handshake_era(first(scope, _VERSION)):
            return self._serve_opening(scope, receive, send)
        # A 2026-07-28 request, one the SDK refuses for want of a session id, or one for a
        # session it does not know (or not for this credential): the SDK answers.
        return self.app(scope, receive, send)

    async def _serve_in_session(
        self, session_id: str, session: _Session, scope: Scope, receive: Receive, send: Send
    ) -> None:
        method = scope["method"]
        if session.closing:
            log.debug("HTTP session %s is closing: a %s got 404", session_id[:8], method)
            await _refused(_GONE, 404, scope, receive, send)
            return
        version = first(scope, _VERSION)
        if version is not None and session.version not in (None, version.decode("latin-1")):
            assert session.version is not None
            await refuse(send, other_version(scope, version, session.version))
            return
        call = method != "GET"
        request_id = posted_request_id(scope) if call else None
        key = None if request_id is None else str(request_id)
        if key is not None and not session.take_id(key):
            await refuse(send, duplicate_id(request_id))
            return
        deleting = method == "DELETE"
        handing = key is None and method == "POST"
        session.in_flight += 1
        session.calls += call
        session.handing += handing
        watch = _Status(send, session, key)
        try:
            if deleting:
                await _handed_over(session)
            await self.app(scope, receive, watch)
        finally:
            self._request_ended(session_id, session, call=call)
            watch.release()  # not answered whole (its client went away)
            if handing:
                _handing_ended(session)
            elif deleting:
                session.closing = False  # forgotten below, or refused: it lives on
        status = watch.status
        gone = status == 404 or (deleting and 200 <= status < 300)
        if gone and self._sessions.get(session_id) is session:
            self._forget(session_id)

    async def _serve_opening(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with self._lock:
            room = await self._make_room()
            if room:
                self._opening += 1
        if not room:
            log.warning("refused a new HTTP session: %d sessions, all busy", len(self))
            await _refused(_BUSY, 503, scope, receive, send)
            return
        opened: tuple[str, _Session] | None = None

        async def watch(message: Message) -> None:
            nonlocal opened
            if message["type"] == "http.response.start" and opened is None:
                found = _session_id(message) if message["status"] < 400 else None
                if found is not None:
                    user = scope.get("user")
                    session = _Session(_owner(scope), user, anyio.current_time())
                    session.version = negotiated_version(scope)
                    self._sessions[found] = session
                    self._opening -= 1
                    opened = found, session
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            if opened is None:
                self._opening -= 1
            else:
                self._request_ended(*opened, call=True)

    def _request_ended(self, session_id: str, session: _Session, *, call: bool) -> None:
        session.in_flight -= 1
        session.calls -= call
        if not session.calls and self._calls_ended is not None:
            self._calls_ended.set()
        if session.in_flight or self._sessions.get(session_id) is not session:
            return
        session.last_active = anyio.current_time()
        if session.idle is not None:
            session.idle.set()
            session.idle = None
        self._sessions.move_to_end(session_id)
        if self._timer_waits:
            self._wake.set()

    async def _make_room(self) -> bool:
        """Close expired sessions, then the least recently active idle ones while full.
        False when every session is busy."""
        await self._close_expired()
        while len(self._sessions) + self._opening >= self.max_sessions:
            oldest = next((sid for sid, s in self._sessions.items() if not s.in_flight), None)
            if oldest is None:
                return False
            log.info("closing HTTP session %s: %d sessions open", oldest[:8], len(self))
            await self._close(oldest)
        return True

    async def _close_idle_sessions(self) -> None:
        while True:
            idle = self._oldest_idle()
            self._wake = anyio.Event()
            self._timer_waits = idle is None
            delay = math.inf if idle is None else idle.last_active + self.idle_timeout
            with anyio.move_on_after(delay - anyio.current_time()):
                await self._wake.wait()
            async with self._lock:
                await self._close_expired()

    def _oldest_idle(self) -> _Session | None:
        return next((s for s in self._sessions.values() if not s.in_flight), None)

    async def _close_expired(self) -> None:
        now = anyio.current_time()
        for session_id, session in list(self._sessions.items()):
            if session.in_flight:
                continue
            if session.last_active + self.idle_timeout > now:
                break  # the rest were active later
            log.info("closing HTTP session %s: idle for %.0f s", session_id[:8], self.idle_timeout)
            await self._close(session_id)

    async def _close(self, session_id: str) -> None:
        session = self._forget(session_id)
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "DELETE",
            "scheme": "http",
            "path": "/",
            "raw_path": b"/",
            "root_path": "",
            "query_string": b"",
            "headers": [(_SESSION_ID, session_id.encode())],
            "client": None,
            "server": None,
            "user": session.user,
        }
        sent_body = False

        async def receive() -> Message:
            nonlocal sent_body
            if sent_body:
                return {"type": "http.disconnect"}
            sent_body = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def discard(message: Message) -> None:
            pass

        try:
            await self.app(scope, receive, discard)
        except Exception:  # the session is forgotten either way; the caller goes on
            log.exception("closing HTTP session %s failed", session_id[:8])

    def _forget(self, session_id: str) -> _Session:
        session = self._sessions.pop(session_id)
        for event in (session.closed, session.idle):
            if event is not None:
                event.set()
        return session


async def _handed_over(session: _Session) -> None:
    """Mark `session` closing, and return once its notifications in flight are handed over."""
    session.closing = True
    with anyio.move_on_after(_HANDING_GRACE):
        while session.handing:
            session.handed = anyio.Event()
            await session.handed.wait()
    session.handed = None


def _handing_ended(session: _Session) -> None:
    session.handing -= 1
    if not session.handing and session.handed is not None:
        session.handed.set()


_GONE = {"code": types.INVALID_REQUEST, "message": "Not Found: Session has been terminated"}
"""What the SDK answers on a session it closed: the client initializes again."""
_BUSY = {"code": types.INTERNAL_ERROR, "message": "Too many open sessions"}


async def _refused(
    error: dict[str, Any], status: int, scope: Scope, receive: Receive, send: Send
) -> None:
    """Answer with `error` under the request's id (null for anything but a request with a
    valid id, as the SDK answers every such refusal)."""
    message = {"jsonrpc": "2.0", "id": posted_request_id(scope), "error": error}
    await JSONResponse(message, status)(scope, receive, send)


def _handshake_era(version: bytes | None) -> bool:
    """Whether the SDK serves a request with this version header on its session path: a
    handshake-era version, or none (mcp 2.3.0 routes by the header alone)."""
    return version is None or version.decode("latin-1") in HANDSHAKE_PROTOCOL_VERSIONS


def _owner(scope: Scope) -> AuthorizationContext | None:
    user = scope.get("user")
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None


def _session_id(message: Message) -> str | None:
    headers: list[tuple[bytes, bytes]] = message.get("headers", [])
    return next((v.decode("latin-1") for k, v in headers if k.lower() == _SESSION_ID), None)
