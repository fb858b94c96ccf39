"""Serving over streamable HTTP at `/mcp`, with the checks a network service needs.

- Bearer tokens: read from an environment variable named in config (`[gateway] tokens_env`,
  or `--token-env`), compared in constant time, never logged; each caller known by its
  token's name or digest (`static_tokens`). Serving on an address other
  than loopback without a token is refused before anything binds.
- DNS rebinding: `Host` and `Origin` must name the bound address, host and port exactly
  (loopback names for loopback), or match an allowed pattern from config (`host_check`).
- CORS for the configured `allowed_origins` (a browser app such as the MCP Inspector UI):
  preflights answered before the token check, answers naming the origin (`cors`).
- Request bodies above `max_request_bytes` are refused with 413 (POST bodies by `envelope`,
  the others by the SDK's endpoint); a body that is not one JSON-RPC message gets its
  JSON-RPC error (`envelope`).
- 2025-era sessions close after `http_session_idle_timeout`, and at most `http_max_sessions`
  are open, the oldest idle one closed to make room (`http_sessions`).
- A connection must send its request's head within `read_timeout` (30 s), then its body
  within as long (408 otherwise), and at most
  `http_max_connections` are open, the one waiting longest for a request closed to make room
  (`connections`): before any token is checked, a client could otherwise hold them all.
- Told to stop, the server goes on answering all but new calls while the calls in flight
  finish, and what their clients ask next (`draining`); then it stops taking connections.
  A `stateless` one (a replica behind a load balancer) stops taking connections at once,
  and answers 503 what still reaches it, for the balancer to send it to another replica.
- An idle connection stays open `http_keep_alive` s (120; uvicorn's own 5 s is what the mcp
  SDK's `Client` keeps one idle too: a request sent as the server closes it gets no answer,
  and the client's session dies of that).
- `stateless=True` keeps no session between requests, for replicas behind a load balancer
  (2026-07-28 requests are stateless anyway).

Layers of a request, outermost first: Host/Origin, CORS, bearer token (`challenges`), body
size and envelope, OAuth scopes (`challenges`), session limits, the server's `http_layers`,
the SDK's session manager. The server's layers sit inside the session limits so that what
they answer on a 2025-era session counts as that session's activity. A layer hands what it
lets through on as the next layer's awaitable (a plain `def __call__`) rather than awaiting
it in a frame of its own: an open GET stream (one per idle 2025-era session) would keep every
such frame alive. A request to `/mcp` skips Starlette's own layers (`HttpApp`): they do
nothing for it but cost CPU on every call and a frame each on every open stream.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
from collections.abc import AsyncGenerator, Callable, Generator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast, runtime_checkable

import anyio
import anyio.abc
import uvicorn
from mcp.server import Server
from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend
from mcp.server.auth.provider import TokenVerifier
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkits.open_files import reserved_files

from ...config import GatewaySettings
from ...errors import ConfigError, GatewayError
from ...resource_server import ResourceServerSettings
from .auth import AnyOf, OAuthTokens, ScopePolicy, metadata_routes, resource_metadata_url
from .challenges import RequireToken, ScopeChallenge, unchecked_token
from .connections import DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, ConnectionLimits
from .cors import Cors
from .draining import (
    ANSWER_SLACK,
    FOLLOW_UP,
    LEAVING,
    SHUTDOWN_GRACE,
    SHUTTING_DOWN,
    Drains,
    Requests,
    wind_down,
)
from .envelope import EnvelopeCheck
from .host_check import LOOPBACK_NAMES, AllowedHosts, HostCheck, is_loopback
from .http_sessions import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS, SessionLimits
from .listening import bind_socket, listen_on, stop_listening
from .request_headers import first
from .static_tokens import StaticTokens, parse_tokens

OPENAI_PREFIX = "/v1/"
"""Where a server's OpenAI-compatible API is served (`server.openai_api`)."""

__all__ = [
    "MCP_PATH",
    "HttpApp",
    "HttpOptions",
    "StaticTokens",
    "allowed_hosts",
    "http_app",
    "http_options",
    "is_loopback",
    "serve_http",
]

MCP_PATH = "/mcp"
_MCP_PATHS = frozenset((MCP_PATH, MCP_PATH + "/"))
"""`/mcp/` is served as `/mcp`: a redirect's Location would be built from what a proxy in front
hides (its scheme, a path prefix it strips), so a client behind TLS or a sub-path was sent to
plain `http://` and out of the sub-path, and before its token was checked."""
MIN_TOKEN_CHARS = 16
"""Shorter bearer tokens are refused on an address others can reach: they could be guessed."""
DEFAULT_KEEP_ALIVE = 120
_REQUEST_SLACK = ANSWER_SLACK
"""uvicorn's own grace, after ours: the calls still running at the end of ours are answered
with an error result (`EndsCalls`), where uvicorn would cancel their requests (no answer, and
a traceback in the log)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HttpOptions:
    host: str
    port: int
    tokens: tuple[str, ...] = ()
    """As written: `TOKEN` or `NAME=TOKEN` each (`static_tokens`)."""
    stateless: bool = False
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    max_request_bytes: int = 4 * 1024 * 1024
    session_idle_timeout: float = DEFAULT_IDLE_TIMEOUT
    max_sessions: int = DEFAULT_MAX_SESSIONS
    keep_alive: int = DEFAULT_KEEP_ALIVE
    """Seconds an idle connection stays open."""
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    read_timeout: float = DEFAULT_READ_TIMEOUT
    """Seconds a connection has to send a request's head, and then its body (`connections`)."""
    oauth: ResourceServerSettings | None = None
    """Take OAuth access tokens too (`auth`)."""

    def __repr__(self) -> str:  # the tokens are secrets
        return f"HttpOptions(host={self.host!r}, port={self.port}, tokens={len(self.tokens)})"


def http_options(
    address: str,
    settings: GatewaySettings,
    *,
    token_env: str | None = None,
    stateless: bool = False,
) -> HttpOptions:
    """Options for `HOST:PORT` and the config; raises `ConfigError` for what must not serve."""
    host, port = _parse_address(address)
    env = token_env or settings.tokens_env
    entries = _read_tokens(env) if env else ()
    try:
        tokens = parse_tokens(entries, env or "")
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not tokens and settings.oauth is None and not is_loopback(host):
        raise ConfigError(
            f"refusing to serve HTTP on {host} without a bearer token: anyone who can reach it "
            'could run your agents and tools. Set [gateway] tokens_env = "AGENT_GATEWAY_TOKENS" '
            "(or pass --token-env VAR) and put the tokens, comma-separated, in that variable; "
            "or serve on 127.0.0.1"
        )
    secret_env = settings.oauth.introspection_client_secret_env if settings.oauth else None
    if secret_env and not os.environ.get(secret_env):
        # As an unset tokens_env: refused here, not found out on every opaque token.
        raise ConfigError(
            "[gateway.oauth] introspection_client_secret_env: the variable "
            f"{secret_env} is not set or empty"
        )
    short = [i for i, token in enumerate(tokens, 1) if len(token.secret) < MIN_TOKEN_CHARS]
    if short and not is_loopback(host):
        which = ", ".join(f"#{i}" for i in short)
        raise ConfigError(
            f"refusing to serve HTTP on {host}: bearer token {which} in {env} is shorter than "
            f"{MIN_TOKEN_CHARS} characters, so anyone who can reach it could guess it. Use long "
            "random tokens, e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))'"
        )
    options = HttpOptions(
        host=host,
        port=port,
        tokens=entries,
        stateless=stateless,
        allowed_hosts=tuple(settings.allowed_hosts),
        allowed_origins=tuple(settings.allowed_origins),
        max_request_bytes=settings.max_request_bytes,
        session_idle_timeout=settings.http_session_idle_timeout,
        max_sessions=settings.http_max_sessions,
        keep_alive=settings.http_keep_alive,
        max_connections=settings.http_max_connections,
        oauth=settings.oauth,
    )
    try:
        AllowedHosts.build((), 0, options.allowed_hosts, options.allowed_origins)
    except ValueError as exc:
        raise ConfigError(f"[gateway] allowed_hosts/allowed_origins: {exc}") from exc
    if stateless and settings.state_key_env is None:
        # Not refused: one stateless process (a test, a loopback dev server) works as is.
        log.warning(
            "serving --stateless without [gateway] state_key_env: a 2026-07-28 round's state "
            "is sealed with a key of this process, so only this replica takes its next round "
            "(another answers 'Invalid or expired requestState'); behind a load balancer, set "
            "state_key_env to a variable holding the same key on every replica"
        )
    return options


def _parse_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"--http wants HOST:PORT, e.g. 127.0.0.1:8000 or [::1]:8000, not {address!r}"
        )
    return host, int(port)


def _read_tokens(env: str) -> tuple[str, ...]:
    tokens = tuple(t.strip() for t in os.environ.get(env, "").split(",") if t.strip())
    if not tokens:
        raise ConfigError(f"the bearer tokens variable {env} is not set or empty")
    return tokens


def allowed_hosts(options: HttpOptions) -> AllowedHosts | None:
    """The Host/Origin rules for the bound address and the configured patterns; None when
    the checks are off (a wildcard bind with no `allowed_hosts`). ValueError on a bad pattern.
    """
    host = options.host
    names: tuple[str, ...] = (host,)
    if is_loopback(host):  # the bound address, and the names of loopback (127.0.0.2 too)
        names = tuple(dict.fromkeys((host, *LOOPBACK_NAMES)))
    elif host in ("0.0.0.0", "::", ""):
        if not options.allowed_hosts:
            # Any name may reach a wildcard bind; the bearer token is the protection then.
            log.warning("Host/Origin checks are off: set [gateway] allowed_hosts to turn them on")
            return None
        names = ()
    return AllowedHosts.build(names, options.port, options.allowed_hosts, options.allowed_origins)


@runtime_checkable
class Running(Protocol):
    """A layer that runs something of its own while the app serves (its lifespan)."""

    def running(self) -> AbstractAsyncContextManager[object]: ...


class HttpApp:
    """ASGI: a request to `/mcp` (or `/mcp/`) goes through the middleware to the MCP endpoint,
    one under `/v1/` through the same middleware to the OpenAI-compatible API (when the server
    has one: `openai_api`); the rest (other routes, lifespan) to Starlette. Starlette's own layers (error handlers, router,
    route) do nothing for the endpoint, an ASGI app of its own, and cost 7 % of the CPU of a
    call passed through (bench/RESULTS.md). An error escaping the endpoint is uvicorn's to log
    and answer (500), as it was Starlette's."""

    def __init__(self, mcp: ASGIApp, rest: Starlette, openai: ASGIApp | None = None) -> None:
        self._mcp = mcp
        self._openai = openai
        self._rest = rest
        self.state = rest.state

    def running(self) -> AbstractAsyncContextManager[None]:
        """The app's lifespan (the session manager), for a caller serving it without one."""
        return cast(
            AbstractAsyncContextManager[None], self._rest.router.lifespan_context(self._rest)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # A coroutine function, or uvicorn would take this for an ASGI 2 app.
        if scope["type"] == "http" and scope["path"] in _MCP_PATHS:
            if scope["method"] == "GET" and first(scope, _LAST_EVENT_ID) is not None:
                scope = _without_last_event_id(scope)
            await self._mcp(scope, receive, send)
        elif (
            self._openai is not None
            and scope["type"] == "http"
            and scope["path"].startswith(OPENAI_PREFIX)
        ):
            await self._openai(scope, receive, send)
        else:
            await self._rest(scope, receive, send)


def http_app(server: Server[Any], options: HttpOptions) -> HttpApp:
    """The ASGI app serving `server` at `/mcp` (its lifespan runs the session manager).

    `options.port` is the bound port the Host check expects; 0 accepts any port.
    `app.state.sessions` is the `SessionLimits` (None when stateless), `app.state.layers` the
    server's `http_layers` as built.
    """
    manager = _SessionManager(
        app=server,
        stateless=options.stateless,
        # Host/Origin are checked by `HostCheck`, exactly; the SDK's own check matches ports
        # as prefixes. Its Content-Type check stays on.
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=options.max_request_bytes,
        # `SessionLimits` closes idle sessions; the SDK's cap stays as a backstop.
        session_idle_timeout=None,
        max_sessions=options.max_sessions,
    )
    endpoint: ASGIApp = StreamableHTTPASGIApp(manager)
    layers: list[ASGIApp] = []
    for layer in getattr(server, "http_layers", ()):
        endpoint = layer(endpoint)
        layers.append(endpoint)
    sessions = None
    if not options.stateless:
        sessions = SessionLimits(
            endpoint, max_sessions=options.max_sessions, idle_timeout=options.session_idle_timeout
        )
        endpoint = sessions
    policy = getattr(server, "scope_policy", None)
    metadata_url = resource_metadata_url(options.oauth) if options.oauth is not None else None
    if options.oauth is not None and isinstance(policy, ScopePolicy):
        endpoint = ScopeChallenge(endpoint, policy, metadata_url)
    endpoint = EnvelopeCheck(endpoint, options.max_request_bytes)
    middleware: list[Middleware] = []
    allowed = allowed_hosts(options)
    if allowed is not None:
        middleware.append(Middleware(HostCheck, allowed=allowed))
    routes: list[Route] = []
    verifier: TokenVerifier | None = None
    if options.tokens:
        verifier = StaticTokens(parse_tokens(options.tokens, "the tokens"))
    required: list[str] = []
    oauth_tokens: OAuthTokens | None = None
    if options.oauth is not None:  # an OAuth resource server, static tokens beside
        required = list(options.oauth.required_scopes)
        static = [verifier] if verifier is not None else []
        oauth_tokens = OAuthTokens(options.oauth)
        verifier = AnyOf([*static, oauth_tokens], static_scopes=required)
        routes = metadata_routes(options.oauth)
    if verifier is not None:
        endpoint = RequireToken(endpoint, required, metadata_url)
    if options.allowed_origins:  # a browser's preflight carries no token: answered before
        endpoint = Cors(endpoint, options.allowed_origins)
    if verifier is not None:
        middleware += [
            Middleware(
                AuthenticationMiddleware,
                backend=BearerAuthBackend(verifier),
                on_error=unchecked_token,  # an issuer unreachable: 503
            ),
            Middleware(AuthContextMiddleware),
        ]

    @asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        async with manager.run(), AsyncExitStack() as stack:
            if sessions is not None:
                await stack.enter_async_context(sessions.running())
            if oauth_tokens is not None:  # its HTTP client for issuers' keys, introspection
                await stack.enter_async_context(oauth_tokens.running())
            for layer in layers:  # those that run something of their own while serving
                if isinstance(layer, Running):
                    await stack.enter_async_context(layer.running())
            yield

    rest = Starlette(
        routes=[Route(MCP_PATH, endpoint=endpoint), *routes],
        middleware=middleware,
        lifespan=lifespan,
    )
    # Another path with a slash too many gets 404, not a redirect to an absolute URL (above).
    rest.router.redirect_slashes = False
    rest.state.sessions = sessions
    rest.state.layers = layers
    mcp = _in_middleware(endpoint, middleware)
    openai: ASGIApp | None = getattr(server, "openai_api", None)
    if openai is not None:  # its own token refusals, in OpenAI's shape
        if options.allowed_origins:
            openai = Cors(openai, options.allowed_origins)
        openai = _in_middleware(openai, middleware)
    return HttpApp(mcp, rest, openai)


def _in_middleware(app: ASGIApp, middleware: list[Middleware]) -> ASGIApp:
    for cls, args, kwargs in reversed(middleware):  # as Starlette stacks them
        app = cls(app, *args, **kwargs)
    return app


_LAST_EVENT_ID = b"last-event-id"


def _without_last_event_id(scope: Scope) -> Scope:
    """A GET resuming a stream, as a plain GET: with no event store (events are not kept, so
    there is nothing to resume) the SDK answered it with nothing at all, which uvicorn made a
    500. The spec lets a server not replay; the client gets a new stream."""
    headers: list[tuple[bytes, bytes]] = scope["headers"]
    return {**scope, "headers": [(k, v) for k, v in headers if k != _LAST_EVENT_ID]}


class _SessionManager(StreamableHTTPSessionManager):
    """The SDK's, but the answer that opens a 2025-era session is JSON, not an event stream,
    and a refusal, or a failed `initialize` (answered 200 with a JSON-RPC error, no params or a
    bad protocolVersion), hands out no session id and keeps no session.

    Nothing precedes an `initialize` result on its stream, and a JSON answer spares the client
    an event-stream reader and the server its stream machinery (a handshake-era open, call and
    close: 0.6 ms less CPU in the client, 0.5 ms less here; bench/RESULTS.md). The session's
    later requests are answered as before: on an event stream, where progress, log messages
    and the server's own requests can precede the result.

    The SDK makes a session for every request without a session id (a GET, a DELETE, an
    OPTIONS too) and discards it when the answer is an error; the error still carried the
    discarded session's `mcp-session-id`, a session id handed out for nothing.
    """

    async def _serve_opening_request(  # mcp 2.3: where a new session's transport answers first
        self,
        http_transport: StreamableHTTPServerTransport,
        scope: Scope,
        receive: Receive,
        send: Send,
    ) -> None:
        held: Message | None = None
        failed = False

        async def sending(message: Message) -> None:
            nonlocal held, failed
            if message["type"] == "http.response.start":  # answered: the rest as before
                http_transport.is_json_response_enabled = False
                if message["status"] >= 400:  # no session: the SDK discards it
                    message = _without_session_id(message)
                else:  # an initialize answered: held until its body says how
                    held = message
                    return
            elif held is not None:
                start, held = held, None
                if not message.get("more_body") and _is_error(message.get("body", b"")):
                    failed = True  # the SDK answers 200; its session would live on
                    start = _without_session_id(start)
                await send(start)
            await send(message)

        http_transport.is_json_response_enabled = True
        try:
            await super()._serve_opening_request(http_transport, scope, receive, sending)
        finally:
            http_transport.is_json_response_enabled = False
        if failed:
            session_id = http_transport.mcp_session_id
            assert session_id is not None  # a session's transport
            await self._discard_session(session_id, http_transport)


def _without_session_id(start: Message) -> Message:
    headers: list[tuple[bytes, bytes]] = start.get("headers", [])
    return {**start, "headers": [(k, v) for k, v in headers if k.lower() != b"mcp-session-id"]}


def _is_error(body: bytes) -> bool:
    """Whether a JSON answer is a JSON-RPC error (a failed `initialize`: no session)."""
    try:
        answer = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(answer, dict) and "error" in answer


async def serve_http(
    server: Server[Any],
    options: HttpOptions,
    *,
    on_ready: Callable[[str], None] | None = None,
    stop: anyio.Event | None = None,
    sock: socket.socket | None = None,
    grace: float = SHUTDOWN_GRACE,
) -> None:
    """Serve until cancelled, or until `stop` is set; either way a server that `Drains` takes
    no new call, and the calls in flight get `grace` seconds to finish while every other
    request is answered (`draining`; after `stop`, a cancel cuts that short); a `stateless`
    one takes no new connection and answers every new request 503. Then a server that
    `EndsCalls` answers the calls it still runs with an error result saying so, and what
    their clients ask next is answered as during the grace, until they are quiet (within
    `ANSWER_SLACK` seconds). Then no new connection is taken and the sessions close (uvicorn
    cancels what still runs `_REQUEST_SLACK` seconds later). `on_ready` gets the URL once the
    port is bound (port 0 works). `sock`: the socket `bind_socket` bound to `options`'
    address (else bound here), closed when serving ends."""
    if sock is None:
        sock = bind_socket(options.host, options.port)
    try:
        listen_on(sock, options.host, options.port)
    except GatewayError:
        sock.close()
        raise
    port = sock.getsockname()[1]
    name = f"[{options.host}]" if ":" in options.host else options.host
    app = http_app(server, replace(options, port=port))
    sessions: SessionLimits | None = app.state.sessions
    connections = ConnectionLimits(options.max_connections, options.read_timeout)
    requests = Requests(app)
    config = uvicorn.Config(
        requests,
        interface="asgi3",  # `Requests` is a plain `def`: uvicorn would guess ASGI 2
        http=connections.protocol(),  # uvicorn's httptools protocol, bounded (`connections`)
        ws="none",
        log_config=None,  # keep the process's logging; uvicorn would install its own
        log_level=logging.getLogger().getEffectiveLevel(),
        access_log=False,
        # Nothing here reads the client's address or scheme that X-Forwarded-* would set.
        proxy_headers=False,
        # From the end of our grace; without it, from the stop.
        timeout_graceful_shutdown=_REQUEST_SLACK
        + (0 if isinstance(server, Drains) else math.ceil(grace)),
        timeout_keep_alive=options.keep_alive,
    )
    uvicorn_server = _Uvicorn(config)
    finished = anyio.Event()

    async def run(tg: anyio.abc.TaskGroup) -> None:
        # Shielded: a cancelled serve would skip uvicorn's shutdown and leave the lifespan
        # (the session manager) to be torn down by the loop, logging a CancelledError.
        with anyio.CancelScope(shield=True):
            try:
                await uvicorn_server.serve(sockets=[sock])
            finally:
                finished.set()
        tg.cancel_scope.cancel()  # it ended on its own

    async def close_sessions(sessions: SessionLimits) -> None:
        # Open GET streams would hold uvicorn's shutdown: the sessions close, each once its
        # calls in flight end (answered by the cut-off at the latest).
        with anyio.CancelScope(shield=True):
            await sessions.close_all(grace=_REQUEST_SLACK)

    # The connections' files beside the rest (MCP servers reserve theirs as they start).
    limit = f"[gateway] http_max_connections = {options.max_connections}"
    with sock, reserved_files(options.max_connections, limit):
        if on_ready is not None:
            on_ready(f"http://{name}:{port}{MCP_PATH}")
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, tg)
            told = False
            try:
                await (anyio.sleep_forever() if stop is None else stop.wait())
                told = True
            finally:  # stopped or cancelled: shut down gracefully, within the grace
                # New calls are refused; the rest is served as before (`draining`).
                if isinstance(server, Drains):
                    if options.stateless:
                        stop_listening(uvicorn_server, sock)
                        requests.refuse(LEAVING)
                    else:
                        server.refuse_calls(SHUTTING_DOWN)
                    requests.count()
                try:  # the grace, then the calls cut off and their clients' next requests
                    if isinstance(server, Drains):
                        # A replica's clients ask next through the balancer: none comes here.
                        follow_up = 0 if options.stateless else FOLLOW_UP
                        await wind_down(
                            server, requests, finished, grace=grace, follow_up=follow_up, told=told
                        )
                finally:
                    # No new connection from now on; those in flight go on (uvicorn waits).
                    uvicorn_server.should_exit = True
                    if sessions is not None:
                        tg.start_soon(close_sessions, sessions)
                    with anyio.CancelScope(shield=True):
                        await finished.wait()  # uvicorn's own timeout is the backstop


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handlers: SIGINT/SIGTERM belong to the command, which
    stops `serve_http` or cancels it (see `gateway.cli.signals`)."""

    @contextmanager
    def capture_signals(self) -> Generator[None]:
        yield
