"""Opening one connection to a configured server: the SDK's transports plus what a node needs.

Each connection attempt builds a fresh transport (an SDK transport is single-use). On top of
the SDK we add: a stdio server's stderr goes to the node's logger (and its last lines into the
error a failed start reports), and its pipe also carries calls passed through (`stdio_pipe`);
HTTP and SSE get the configured headers and the bearer token, read from the environment at
connect time and never logged (a 401 to it is an error naming where it came from, not the
SDK's "Server returned an error response"), or else the MCP authorization flow (`oauth`) when
the server answers 401; and every stream transport tells the node when the server closes the
connection, so a server that dies while idle is noticed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import ssl
import sys
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from functools import cache, partial
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from anyio.abc import ObjectReceiveStream
from mcp.client import Transport
from mcp.client.auth.utils import extract_field_from_www_auth
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCMessage

from ..errors import ServerConfigError
from ..printable import printable
from .config import McpServerConfig, secret_from_env
from .lean_http import LeanHttp
from .lean_transport import LeanPosts
from .log_secrets import keep_out_of_logs
from .moved_endpoint import MovedEndpoint
from .oauth import LazyOAuth, oauth_for, redirect_mode_from_env, uses_oauth
from .sent_credentials import SentCredentials
from .server_requests import CallsInFlight
from .sse_endpoint import EventStreamRefused, endpoint_guard
from .sse_stream import KEEP_ALIVE, event_streams, sse_transport
from .stderr_tail import StderrLines, StderrTail
from .stdio_pipe import StdioLink, open_stdio

if TYPE_CHECKING:
    # SDK private (mcp 2.3.0): the stream types a `Transport` yields are not exported
    # publicly; used here in annotations only, so nothing at run time depends on the module.
    from mcp.client._transport import ReadStream, TransportStreams

__all__ = [
    "HttpLink",
    "StaticCredentials",
    "StderrTail",
    "TransportFactory",
    "config_transport",
    "watch_transport",
]

_log = logging.getLogger(__name__)

TransportFactory = Callable[[], Transport]
"""Makes a fresh transport for each connection attempt (transports are single-use)."""

_STDERR_LINE_LIMIT = 2_000
_STDERR_READ_SIZE = 65_536
_STDERR_DRAIN_SECONDS = 1.0
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


class HttpLink:
    """What a streamable HTTP connection's requests go through, as its own requests show it:
    the HTTP client (headers, auth, pool), the URL, and once the handshake is done the
    session id and protocol version they carry. A pass-through call (`forward`) sends its own
    request the same way, or on the lean client where that one does the same (`lean()`)."""

    def __init__(self) -> None:
        self.client: httpx2.AsyncClient | None = None
        self.url = ""
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.auth: httpx2.Auth | None = None
        self.lean_http: LeanHttp | None = None
        """Plain http:// without a proxy: the same origin and headers, minus httpx2."""
        self.sent = SentCredentials()
        """The credentials its requests go with, for text made of the answers to mask."""

    def lean(self) -> LeanHttp | None:
        """The lean client, while nothing but headers goes with a request: no auth flow in
        play and no cookies the server set."""
        if self.lean_http is None or self.client is None or self.client.cookies:
            return None
        return None if self.authorizing() else self.lean_http

    def authorizing(self) -> bool:
        """Whether an auth flow is in play: an auth other than ours, or ours once the server
        asked for authorization."""
        return self.auth is not None and not (
            isinstance(self.auth, StaticCredentials)
            or (isinstance(self.auth, LazyOAuth) and not self.auth.engaged)
        )

    def moved(self, url: str) -> None:
        """The endpoint moved at the connection's start (`moved_endpoint`): its requests go to
        `url`, on httpx2 (the lean client sends to the configured URL alone)."""
        self.url = url
        self.lean_http = None

    def observe(self, request: httpx2.Request) -> None:
        headers = request.headers
        if (session_id := headers.get("mcp-session-id")) is not None:
            self.session_id = session_id
        if (version := headers.get("mcp-protocol-version")) is not None:
            self.protocol_version = version


def config_transport(
    config: McpServerConfig,
    *,
    name: str,
    log: logging.Logger,
    stderr_tail: StderrTail,
    auth: httpx2.Auth | None = None,
    in_flight: CallsInFlight | None = None,
    link: HttpLink | None = None,
    stdio_link: StdioLink | None = None,
    on_lost: Callable[[str], None] | None = None,
    on_forgotten: Callable[[int], None] | None = None,
    on_doubt: Callable[[], None] | None = None,
) -> Transport:
    """A new transport for `config`. Raises `ServerConfigError` when a needed env var is unset.

    `auth` replaces the authorization flow a node would use (`auth login` runs its own).
    `in_flight` are the node's calls: an authorization the server asks for during one may be
    put to its caller (`oauth`). `link` is filled in by a streamable HTTP transport,
    `stdio_link` by a stdio one. `on_lost(why)` hears why an SSE event stream failed, before
    it ends as one the server closed (`sse_stream`). `on_forgotten(status)` hears that a
    streamable HTTP server no longer knows the session, `on_doubt()` that it may not
    (`lean_transport`).
    """
    if config.kind != "stdio":
        keep_out_of_logs(config)  # httpx2 and the SDK log its URL
    match config.kind:
        case "stdio":
            assert config.command is not None  # the config validator guarantees it
            command, args = _ending_with_us(config.command, list(config.args))
            params = StdioServerParameters(
                command=command, args=args, env=dict(config.env) or None, cwd=config.cwd
            )
            return _stdio_with_logged_stderr(
                params, log, stderr_tail, stdio_link or StdioLink(), config.max_message_bytes
            )
        case "http":
            assert config.url is not None
            return _streamable_http(
                config.url,
                _headers(config, name),
                config.max_message_bytes,
                _auth(config, name, auth, in_flight),
                link or HttpLink(),
                name,
                SentCredentials.of(config),
                on_forgotten,
                on_doubt,
            )
        case "sse":
            assert config.url is not None
            return _sse(
                config.url,
                _headers(config, name),
                _auth(config, name, auth, in_flight),
                sse_transport(on_lost or _unheard, config.sse_idle_timeout),
                name,
                SentCredentials.of(config),
            )


def _auth(
    config: McpServerConfig,
    name: str,
    given: httpx2.Auth | None,
    in_flight: CallsInFlight | None,
) -> Callable[[], Awaitable[httpx2.Auth | None]]:
    async def make() -> httpx2.Auth | None:
        if given is not None:
            return given
        if not uses_oauth(config):
            return StaticCredentials.of(config, name)
        mode = redirect_mode_from_env("refuse")
        # A node never opens a browser: it asks its caller, or says which command authorises it.
        return LazyOAuth(partial(oauth_for, name, config, mode=mode, in_flight=in_flight))

    return make


class StaticCredentials(httpx2.Auth):
    """Sends requests as they are (the credential is in the client's headers) and makes a 401
    to them an error that says whose credential the server refused, or that no authorization
    flow answers it (`oauth = false`): no retry will change it."""

    def __init__(self, name: str, refused: str, sent: SentCredentials) -> None:
        self._name = name
        self._refused = refused
        self._sent = sent

    @classmethod
    def of(cls, config: McpServerConfig, name: str) -> StaticCredentials | None:
        """The watcher of `config`'s static credential, if it sends one (or of its `oauth =
        false`)."""
        sent = SentCredentials.of(config)
        if config.bearer_token_env is not None:
            return cls(name, f"it refused the token in ${config.bearer_token_env}", sent)
        if any(key.lower() == "authorization" for key in config.headers):
            where = f"mcpServers.{name}.headers"
            return cls(name, f"it refused the Authorization header of {where}", sent)
        if not config.oauth:
            why = f"mcpServers.{name}.oauth is false, so no authorization flow answers it"
            return cls(name, why, sent)
        return None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        response = yield request
        if response.status_code != 401:
            return
        said = [
            field
            for field in (
                extract_field_from_www_auth(response, "error"),
                extract_field_from_www_auth(response, "error_description"),
            )
            if field
        ]
        why = self._sent.mask(f" ({': '.join(said)})") if said else ""
        raise ServerConfigError(
            f"MCP server {self._name!r} answered HTTP 401{why}: {self._refused}"
        )


_DRAIN_SECONDS = 0.5
"""How long closing a response stream may wait for its end, so its connection can be reused."""


@cache
def _tls() -> ssl.SSLContext:
    """The TLS settings of every HTTP server's client, made once: making them reads the CA
    bundle (~20-50 ms), which per server was most of the start of a gateway with 50 of them."""
    return httpx2.create_ssl_context()


_NO_TRUST = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
"""The plain pool's: it never makes a TLS connection, and with no CA to trust this context
would refuse every server if it did."""


class _PoolPerScheme(httpx2.AsyncBaseTransport):
    """httpx's connection pools, one for `http` and one for `https`, each made at its first
    request: a node of a plain-HTTP server (every local one) then never reads the CA bundle,
    while its authorization flow can still reach an authorization server over TLS."""

    def __init__(self) -> None:
        self._pools: dict[bool, httpx2.AsyncHTTPTransport] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        tls = request.url.scheme == "https"
        pool = self._pools.get(tls)
        if pool is None:
            verify = _tls() if tls else _NO_TRUST
            pool = self._pools[tls] = httpx2.AsyncHTTPTransport(
                verify=verify, socket_options=KEEP_ALIVE
            )
        return await pool.handle_async_request(request)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()


class _ReusingConnections(httpx2.AsyncBaseTransport):
    """Keeps POST connections to the server reusable.

    The SDK (mcp 2.3) closes a request's event stream as soon as the response arrived, before
    the server's end of stream; a connection closed mid-body cannot go back to the pool, so
    every call would open a new TCP connection. The server ends that stream right after the
    response, so reading it to the end on close costs one read and keeps the connection.

    A kept connection can also be closed by the server while idle (uvicorn and Node close
    theirs after 5 s, as long as the pool keeps its own): a request sent on it in that instant
    fails with no answer, though the server never read it. Such a request is sent once more,
    on a new connection; never one that failed on a connection opened for it.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            return await self._inner.handle_async_request(request)
        try:
            response = await self._on_a_connection(request)
        except _KeptConnectionClosed:  # the pool now opens a new one: its idle one is gone
            response = await self._inner.handle_async_request(request)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _ReadToEndOnClose(response.stream)
        return response

    async def _on_a_connection(self, request: httpx2.Request) -> httpx2.Response:
        """The response; `_KeptConnectionClosed` if the pool's kept connection failed before
        any answer (a fresh connection's failure raises as it is)."""
        opened = False
        extensions = request.extensions
        outer = extensions.get("trace")

        async def trace(event: str, info: dict[str, Any]) -> None:
            nonlocal opened
            opened = opened or event.startswith("connection.connect_")
            if outer is not None:
                await outer(event, info)

        request.extensions = {**extensions, "trace": trace}
        try:
            return await self._inner.handle_async_request(request)
        except (httpx2.RemoteProtocolError, httpx2.ReadError) as exc:
            if opened or not isinstance(request.stream, httpx2.ByteStream):
                raise  # a fresh connection's failure, or a body that cannot be sent again
            raise _KeptConnectionClosed from exc
        finally:
            request.extensions = extensions

    async def aclose(self) -> None:
        await self._inner.aclose()


class _KeptConnectionClosed(Exception):
    """The server had closed the kept connection a request went out on."""


class _ReadToEndOnClose(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner
        self._ended = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            yield chunk
        self._ended = True

    async def aclose(self) -> None:
        try:
            # Not after the end: reading on would wait for bytes of a next response until the
            # drain timed out, and lose the connection (a body read whole, e.g. a 401 answered
            # by the authorization flow, cost 0.5 s and a new connection).
            if not self._ended:
                with anyio.move_on_after(_DRAIN_SECONDS):
                    async for _ in self._inner:
                        pass
        except httpx2.HTTPError:
            pass  # the connection is lost anyway
        finally:
            await self._inner.aclose()


_SETPRIV = shutil.which("setpriv") if sys.platform == "linux" else None


def _ending_with_us(command: str, args: list[str]) -> tuple[str, list[str]]:
    """The command line that starts the server so that it ends when this process ends.

    A server that is still starting (or never reads its stdin) would not notice that we are
    gone, and the SDK starts it in a session of its own, out of reach of signals sent to our
    process group. On Linux, util-linux's `setpriv` asks the kernel to send it SIGTERM when
    its parent dies, however that happens (SIGKILL included), then execs the server, keeping
    its pid. A command that does not resolve is left as it is, so its error stays the usual one.
    """
    if _SETPRIV is None or shutil.which(command) is None:
        return command, args
    return _SETPRIV, ["--pdeathsig", "TERM", "--", command, *args]


def _headers(config: McpServerConfig, name: str) -> dict[str, str]:
    headers = dict(config.headers)
    if config.bearer_token_env is not None:
        what = f"the bearer token of MCP server {name!r}"
        token = secret_from_env(config.bearer_token_env, what)
        headers["Authorization"] = f"Bearer {token}"
    return headers


@asynccontextmanager
async def _streamable_http(
    url: str,
    headers: dict[str, str],
    max_message_bytes: int,
    auth: Callable[[], Awaitable[httpx2.Auth | None]],
    link: HttpLink,
    name: str,
    sent: SentCredentials,
    on_forgotten: Callable[[int], None] | None,
    on_doubt: Callable[[], None] | None,
) -> AsyncGenerator[TransportStreams]:
    # The SDK wants an httpx2 client for headers and auth; we own its lifetime.
    usable = LeanHttp.usable(url) and _on_asyncio()
    lean = LeanHttp(url, headers, connect_timeout=_HTTP_TIMEOUT.connect) if usable else None
    # The GET stream of the server's own messages: kept while quiet, made again when it fails.
    pools = event_streams(_PoolPerScheme(), partial(_get_stream_lost, name), None)
    reusing = _ReusingConnections(pools)
    posts = LeanPosts(
        reusing,
        lean,
        url,
        link.observe,
        node=name,
        sent=sent,
        on_forgotten=on_forgotten,
        on_doubt=on_doubt,
    )
    transport = MovedEndpoint(posts, url, node=name, on_moved=link.moved)
    link.sent = sent
    link.auth = await auth()
    async with (
        httpx2.AsyncClient(
            headers=headers, timeout=_HTTP_TIMEOUT, transport=transport, auth=link.auth
        ) as http,
        streamable_http_client(
            url, http_client=http, max_sse_event_size=max_message_bytes
        ) as streams,
        lean or nullcontext(),
    ):
        link.client, link.url, link.lean_http = http, url, lean
        try:
            yield streams
        finally:
            link.client = link.lean_http = None


def _get_stream_lost(name: str, why: str) -> None:
    _log.debug("MCP server %r: its GET event stream ended (%s); opening it again", name, why)


def _on_asyncio() -> bool:
    """Whether this runs on asyncio, which the lean client needs (the gateway does)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@asynccontextmanager
async def _sse(
    url: str,
    headers: dict[str, str],
    auth: Callable[[], Awaitable[httpx2.Auth | None]],
    transport: httpx2.AsyncBaseTransport,
    name: str,
    sent: SentCredentials,
) -> AsyncGenerator[TransportStreams]:
    refused: list[str] = []  # why the event stream gave no endpoint (`sse_endpoint`)
    transport = endpoint_guard(transport, name, sent, refused)

    def client(
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        # The SDK's timeouts for its POSTs; the event stream's are the transport's.
        return httpx2.AsyncClient(
            headers=headers, timeout=_HTTP_TIMEOUT, auth=auth, transport=transport
        )

    async with AsyncExitStack() as stack:
        try:
            streams = await stack.enter_async_context(
                sse_client(url, headers=headers, auth=await auth(), httpx_client_factory=client)
            )
        except Exception:
            if refused:  # the SDK's "Child exited without calling task_status.started()"
                raise EventStreamRefused(f"MCP server {name!r} {refused[0]}") from None
            raise
        yield streams


def _unheard(why: str) -> None:
    pass


@asynccontextmanager
async def _stdio_with_logged_stderr(
    params: StdioServerParameters,
    log: logging.Logger,
    tail: StderrTail,
    link: StdioLink,
    max_line_bytes: int,
) -> AsyncGenerator[TransportStreams]:
    # The SDK hands `errlog` to the child as its stderr, so it must be a real file: give it
    # the write end of a pipe and read the other end here, line by line, into the logger.
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    errlog = os.fdopen(write_fd, "w")
    # Shielded: a connection that fails (its server exited at once, saying why on stderr)
    # leaves this block by an exception, which cancels the task group's tasks at once: the
    # pump, unshielded, lost the last lines that error then lacked.
    pumping = anyio.CancelScope(shield=True)
    async with anyio.create_task_group() as tg:
        try:
            async with open_stdio(params, errlog, link, log, max_line_bytes) as streams:
                errlog.close()  # the child holds its own copy; EOF comes when it exits
                tg.start_soon(_pump_stderr, read_fd, log, tail, pumping)
                read_fd = -1  # owned by the pump now
                yield streams
        finally:
            errlog.close()
            if read_fd != -1:
                os.close(read_fd)
            # The pump ends at EOF; a grandchild holding the pipe must not keep us here.
            pumping.deadline = anyio.current_time() + _STDERR_DRAIN_SECONDS


async def _pump_stderr(
    fd: int, log: logging.Logger, tail: StderrTail, scope: anyio.CancelScope | None = None
) -> None:
    def emit(raw: bytes) -> None:
        line = raw.decode(errors="replace").rstrip()
        if line:
            line = line[:_STDERR_LINE_LIMIT]
            tail.append(line)
            # Not formatted unless shown: a server flooding stderr cost most of a core so.
            if log.isEnabledFor(logging.INFO):
                log.info("stderr: %s", printable(line))  # the server's words: never obeyed

    # Bytes: a character of UTF-8 takes up to 4 of them.
    lines = StderrLines(4 * _STDERR_LINE_LIMIT)
    try:
        with scope or anyio.CancelScope():
            while True:
                await anyio.wait_readable(fd)
                try:
                    chunk = os.read(fd, _STDERR_READ_SIZE)
                except BlockingIOError:
                    continue
                if not chunk:
                    break
                for raw in lines.feed(chunk):
                    emit(raw)
    finally:
        emit(lines.finish())
        os.close(fd)


class _WatchedReadStream(ObjectReceiveStream[SessionMessage | Exception]):
    """A transport's read stream that reports its end (the server closed the connection), and
    shows each message to `heard` first (at once, without waiting)."""

    def __init__(
        self,
        inner: ReadStream[SessionMessage | Exception],
        on_closed: Callable[[], None],
        heard: Callable[[JSONRPCMessage], None] | None,
    ) -> None:
        self._inner = inner
        self._on_closed = on_closed
        self._heard = heard

    @property
    def last_context(self) -> Any:
        # The dispatcher duck-types this to run handlers in the sender's context.
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            message = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._on_closed()
            raise
        if self._heard is not None and isinstance(message, SessionMessage):
            self._heard(message.message)
        return message

    async def aclose(self) -> None:
        await self._inner.aclose()


@asynccontextmanager
async def watch_transport(
    transport: Transport,
    on_closed: Callable[[], None],
    heard: Callable[[JSONRPCMessage], None] | None = None,
) -> AsyncGenerator[TransportStreams]:
    """`transport`, calling `on_closed()` when its read stream ends, and `heard` with each
    message it reads (before the session does)."""
    async with transport as (read_stream, write_stream):
        yield _WatchedReadStream(read_stream, on_closed, heard), write_stream
