"""The 2025-era HTTP sessions the SDK keeps, as far as passing a call through needs them.

A handshake-era client (2025-11-25 and before: Claude Desktop through mcp-remote, TypeScript
SDK clients, mcp 1.x) calls tools on a session: what the usual path answers depends on what the
session negotiated (its protocol version, the capabilities its client declared), on its client
(the client's share of the nodes) and on its life (a DELETE, or the SDK ending it, ends its
calls). `HandshakeSessions` keeps that per session id: `track` (server middleware) notes each
session's SDK `Connection` when its `initialize` is answered, and the connection's exit stack
forgets it when the SDK ends the session; a DELETE forgets it at once (`watch_deletes`, an ASGI
layer: the SDK answers 404 from then on, before the connection winds down). Calls passed
through on a session are held here too, so that the client's `notifications/cancelled` and the
session's end reach them as they reach the SDK's own handlers, and so are the questions their
servers wait to have answered by the session's client (`session_questions`).

Only sessions of the SDK's session manager over HTTP have an id; a connection without one
(stdio, in-process, stateless) is handed to `unnamed`, if set: stdio serves one connection, and
its shortcut (`stdio_shortcut`) keeps it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal, cast

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import (
    AuthenticatedUser,
    AuthorizationContext,
    authorization_context,
)
from mcp.server.connection import Connection
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from ...engine import Gateway
from ...limits import PerNode
from ..client_requests.ask_client import asking_capabilities
from ..connection import connection_of
from ..serving import Serving, serving
from ..transports.request_headers import first
from .session_questions import Asking, SessionQuestions

__all__ = ["HandshakeSessions", "OpenSession", "Stopped", "answered_as_json"]

_SESSION_ID = b"mcp-session-id"
_FOUND = "agent_gateway.handshake_session"
"""Where `find` keeps its answer in a request's scope."""
_VERSION = MCP_PROTOCOL_VERSION_HEADER.encode()

Stopped = Literal["cancelled", "closed"]
"""Why a passed-through call was stopped: its client cancelled it, or its session ended."""


@dataclass(slots=True)
class _Call:
    scope: anyio.CancelScope
    stopped: Stopped | None = None


@dataclass(slots=True)
class OpenSession:
    """One live session: its SDK connection, whose credential opened it, and its calls passed
    through now."""

    id: str | None
    """None for a connection without one (stdio)."""
    connection: Connection
    owner: AuthorizationContext | None
    serving: Serving | None
    calls: dict[types.RequestId, _Call] | None = field(default=None)
    """Made for the first call passed through (most sessions are idle most of the time)."""
    questions: SessionQuestions | None = None
    """Made for the first question a server asks the client through a call passed through."""
    _answerable: dict[str, Any] | None = field(default=None, init=False, repr=False)

    @property
    def protocol_version(self) -> str:
        return self.connection.protocol_version

    def answerable(self) -> dict[str, Any]:
        """What its client answers of a server's requests, as the capabilities it declared
        for them (`ask_client.answerable`, for the call's `CallContext.answerable`)."""
        if self._answerable is None:
            self._answerable = asking_capabilities(self.connection.client_capabilities)
        return self._answerable

    async def ask(
        self, on: Asking, request: types.InputRequest
    ) -> types.InputResponse | types.ErrorData:
        """Put a server's `request` to the session's client on a call's answer (`on`)."""
        return await self._questions().ask(on, request)

    def client_gone(self, answer: types.ErrorData) -> None:
        """Its client can answer nothing more: the servers' questions waiting on it, and
        those asked later, get `answer` (`SessionQuestions.close`)."""
        self._questions().close(answer)

    def _questions(self) -> SessionQuestions:
        if self.questions is None:
            declared = self.connection.client_capabilities or types.ClientCapabilities()
            self.questions = SessionQuestions(declared, self.protocol_version)
        return self.questions

    def quota(self, gateway: Gateway) -> PerNode | None:
        """Its client's share of the nodes, as the usual path finds it (None: no bound)."""
        return (
            None
            if self.serving is None
            else self.serving.quotas.of_connection(self.connection, gateway)
        )

    @contextmanager
    def call(self, request_id: types.RequestId, scope: anyio.CancelScope) -> Generator[_Call]:
        """Hold a call passed through on this session while the block runs; `scope` (entered
        around the block) is cancelled when the client cancels the call or the session ends
        (`_Call.stopped` says which)."""
        calls = self.calls if self.calls is not None else {}
        self.calls = calls
        held = _Call(scope)
        calls[request_id] = held
        try:
            yield held
        finally:
            if calls.get(request_id) is held:
                del calls[request_id]

    def stop(self, request_id: object, why: Stopped) -> None:
        """Stop the call `request_id` passed through on this session, if one is held."""
        if not self.calls or not _is_id(request_id):
            return
        held = self.calls.get(cast(types.RequestId, request_id))
        if held is not None and held.stopped is None:
            held.stopped = why
            held.scope.cancel()

    def stop_all(self) -> None:
        for request_id in list(self.calls or ()):
            self.stop(request_id, "closed")


class HandshakeSessions:
    """The live 2025-era HTTP sessions by id (see the module docstring)."""

    def __init__(self) -> None:
        self._open: dict[str, OpenSession] = {}
        self.unnamed: Callable[[OpenSession], None] | None = None
        """Told of each connection without a session id when its `initialize` is answered."""

    def __len__(self) -> int:
        return len(self._open)

    async def track(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Server middleware: notes a session once its `initialize` is answered."""
        result = await call_next(ctx)
        if ctx.method == "initialize":
            self._opened(ctx)
        return result

    def find(self, scope: Scope) -> OpenSession | None:
        """The initialized session a request of `scope` belongs to, if the SDK would serve it
        on that session: its id, its credential, a handshake-era version header (or none).
        Looked up once per request, however many layers ask."""
        if _FOUND in scope:
            return scope[_FOUND]
        session = self._of(scope)
        if session is not None and not session.connection.initialize_accepted:
            session = None
        scope[_FOUND] = session
        return session

    def watch_deletes(self, app: ASGIApp) -> ASGIApp:
        """ASGI, in front of the SDK's endpoint: a session's DELETE (its client's, or the
        session limits') forgets it before the SDK ends it and refuses its requests."""
        return _WatchDeletes(app, self)

    def deleted(self, scope: Scope) -> None:
        """A DELETE of `scope` ends its session (if it names one of this credential)."""
        session = self._of(scope)
        if session is not None:
            assert session.id is not None  # one of `_open`: named by its id
            self._closed(session.id)

    def _of(self, scope: Scope) -> OpenSession | None:
        session_id = first(scope, _SESSION_ID)
        version = first(scope, _VERSION)
        if session_id is None or (
            version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS
        ):
            return None
        session = self._open.get(session_id.decode("latin-1"))
        return (
            session if session is not None and session.owner == _owner(scope.get("user")) else None
        )

    def _opened(self, ctx: ServerRequestContext[Any, Any]) -> None:
        connection = connection_of(ctx)
        if connection is None:
            return
        session_id = connection.session_id
        if session_id is None:
            if self.unnamed is not None:
                self.unnamed(OpenSession(None, connection, None, serving(ctx)))
            return
        if session_id in self._open:
            return
        scope: Scope | None = getattr(ctx.request, "scope", None)
        owner = _owner(scope.get("user") if scope is not None else None)
        self._open[session_id] = OpenSession(session_id, connection, owner, serving(ctx))
        # An exit function, not `callback`: its wrapper would cost ~0.5 kB per session.
        connection.exit_stack.push(partial(self._exited, session_id))

    def _exited(self, session_id: str, *_exc_info: object) -> None:
        self._closed(session_id)

    def _closed(self, session_id: str) -> None:
        session = self._open.pop(session_id, None)
        if session is not None:
            session.stop_all()


class _WatchDeletes:
    __slots__ = ("_sessions", "app")

    def __init__(self, app: ASGIApp, sessions: HandshakeSessions) -> None:
        self.app = app
        self._sessions = sessions

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] == "http" and scope["method"] == "DELETE":
            self._sessions.deleted(scope)
        return self.app(scope, receive, send)  # no frame here while a stream is open


def answered_as_json(scope: Scope) -> bool:
    """Whether the SDK would take a POST of `scope` on a session: it accepts JSON and event
    streams, and says its body is JSON (else the SDK answers it with an error)."""
    request = Request(scope)
    return check_accept_headers(request) == (True, True) and request.headers.get(
        "content-type", ""
    ).startswith("application/json")


def _owner(user: object) -> AuthorizationContext | None:
    """Whose credential a request carries, as the SDK's session manager compares it."""
    return authorization_context(user) if isinstance(user, AuthenticatedUser) else None


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
