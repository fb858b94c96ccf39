"""One MCP server's session, owned by one task: connect, serve, notice loss, reconnect.

The SDK's `Client` must be entered and exited in the same task, so `OwnedSession.run()` is
that task. It connects (bounded by the server's `connect_timeout`), lists the tools, hands the listing
to its owner, and serves: it re-lists on `tools/list_changed` (handshake era) or on events of a
`subscriptions/listen` stream (2026-07-28), passes the server's prompts and resources
`list_changed` (also, on each new session, that they may have changed) and its
resource updates on to its owner, and runs what the owner serves beside
each connection (`serve_connection`), until the connection is lost — the server closed
its end, or a caller saw the connection close and dropped it, or a request found that the
server no longer knows the session (it restarted: `Connection.forgotten`). Then it reconnects:
at once after a session that lived a while, with exponential backoff otherwise, or sooner when
a call asks for an attempt (`reconnects`). Calls do not go through this task: callers use the
live `Connection`'s client from their own tasks, a read once more on the next session if the
server had forgotten this one (`on_live`).

Nothing here raises for the server's sake; what went wrong is in `health`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Literal, TypeVar, cast

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.client import IncomingMessage, Transport
from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ToolsListChanged
from mcp_types.version import LATEST_MODERN_VERSION, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from ..errors import (
    AuthorizationServerFailed,
    ConnectionLost,
    NodeStopped,
    ServerUnavailable,
    find_error,
)
from ..health import HealthState, NodeHealth
from ..printable import printable
from .backoff import DEFAULT_BACKOFF, Backoff
from .config import McpServerConfig
from .connection import Connection
from .error_text import describe_error
from .naming import is_offered
from .oauth import find_authorization_required
from .reconnects import Reconnects
from .sent_credentials import SentCredentials
from .server_requests import CallsInFlight
from .stderr_tail import StderrTail
from .stdio_pipe import StdioLink
from .tool_listing import ToolListing
from .transport import HttpLink, TransportFactory, config_transport, watch_transport

__all__ = ["AdoptListing", "ListChanged", "OwnedSession", "ServeConnection", "Target"]

Target = Server[Any] | MCPServer | TransportFactory
"""What a node connects to instead of its config's transport: an in-process server (tests,
embedding) or a factory making a fresh `Transport` per connection attempt."""

AdoptListing = Callable[
    [Sequence[mcp_types.Tool], mcp_types.ServerCapabilities], Callable[[], Awaitable[None]]
]
"""Takes a fresh tool listing, and the capabilities of the session it came from, at once
(synchronously) and returns what to await to announce it; the session announces only once
the connection is `ready`."""

ListChanged = Callable[[Literal["prompts", "resources"]], Awaitable[None]]
"""Told when the server says its prompts or its resources changed (the owner fetches them live)."""

ServeConnection = Callable[["Connection", Client], Coroutine[Any, Any, None]]
"""Run beside each live connection, for as long as it lives (cancelled when it ends)."""

_T = TypeVar("_T")

_CLIENT_INFO = mcp_types.Implementation(name="agent-gateway", version="0.1.0")
_MODES = {"auto": "legacy", "legacy": "legacy", "modern": LATEST_MODERN_VERSION}
"""`auto` starts with the handshake era: only there can a server written the usual way
(`ctx.session.create_message(...)` during a call) reach its client, and a gateway must not take
that from the tools it proxies. A server that refuses the handshake gets the SDK's own `auto`."""
_RELISTEN_DELAY = 1.0
_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def _results_unchecked(client: Client) -> None:
    """Make `client` return a tool's result that breaks the tool's own output schema as the
    server sent it, as `Forward` does. The SDK client replaces it with an error (`Invalid
    structured content...`), and so a proxy's client got our error instead of the server's
    result, and a model lost what the tool said; a client of the proxy may check it itself."""

    async def unchecked(name: str, result: mcp_types.CallToolResult) -> None:
        del name, result

    # An attribute of this one session: `validate_tool_result` is where the SDK's client and
    # session both check results (a method of ours in its place, as `declare_per_call` does).
    setattr(client.session, "validate_tool_result", unchecked)  # noqa: B010


def _now() -> datetime:
    return datetime.now(UTC)


_ListKind = Literal["tools", "prompts", "resources"]


def _announced_lists(capabilities: mcp_types.ServerCapabilities) -> frozenset[_ListKind]:
    """The lists worth a `subscriptions/listen` stream (2026-07-28)."""
    # With `protocol="modern"` there is no discovery, so capabilities are unknown (all empty):
    # ask for every list; otherwise for what the server says it announces (tools unless it
    # says it never announces them, as before).
    if capabilities == mcp_types.ServerCapabilities():
        return frozenset({"tools", "prompts", "resources"})
    wanted: set[_ListKind] = set()
    if capabilities.tools is None or capabilities.tools.list_changed:
        wanted.add("tools")
    if capabilities.prompts is not None and capabilities.prompts.list_changed:
        wanted.add("prompts")
    if capabilities.resources is not None and capabilities.resources.list_changed:
        wanted.add("resources")
    return frozenset(wanted)


class OwnedSession:
    """The session to one server, kept alive by `run()`; see the module docstring."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        adopt_listing: AdoptListing,
        on_list_changed: ListChanged,
        client_options: Mapping[str, Any],
        on_server_log: Callable[[mcp_types.LoggingMessageNotificationParams], Awaitable[bool]]
        | None = None,
        on_resource_updated: Callable[[str], Awaitable[None]] | None = None,
        serve_connection: ServeConnection | None = None,
        target: Target | None = None,
        backoff: Backoff = DEFAULT_BACKOFF,
        log: logging.Logger,
        in_flight: CallsInFlight | None = None,
    ) -> None:
        self._name = name
        self._in_flight = in_flight
        self._config = config
        self._adopt_listing = adopt_listing
        self._on_list_changed = on_list_changed
        self._client_options = client_options
        self._relay_log = on_server_log
        self._on_resource_updated = on_resource_updated
        self._serve_connection = serve_connection
        self._target = target
        self._backoff = backoff
        self._log = log
        self._retries = self._new_retries()
        self._running = False
        self._conn: Connection | None = None
        self._capabilities: mcp_types.ServerCapabilities | None = None
        self._state = NodeHealth(node=name, state="stopped", since=_now(), tool_count=0)
        self._changed = anyio.Event()
        self._mode = _MODES[config.protocol]
        self._connect_timeout = config.connect_timeout or config.timeout
        self._listing = ToolListing(
            name,
            log=log,
            offered=partial(is_offered, include=config.include, exclude=config.exclude),
        )

    @property
    def health(self) -> NodeHealth:
        """The state; `tool_count` is the owner's to fill in."""
        return self._state

    async def wait_for_health(self, predicate: Callable[[NodeHealth], bool]) -> NodeHealth:
        """Wait until `predicate(health)` holds (checked now and on every state change)."""
        while True:
            changed = self._changed
            if predicate(self._state):
                return self._state
            await changed.wait()

    @property
    def capabilities(self) -> mcp_types.ServerCapabilities | None:
        """What the server offered on its last session, kept while the next is made (a
        restart mostly offers the same); None before one was ready."""
        return self._capabilities

    @property
    def live(self) -> Connection | None:
        """The live connection now, if there is one (no waiting)."""
        conn = self._conn
        return conn if conn is not None and conn.lost is None and conn.client is not None else None

    async def ready_connection(self) -> Connection:
        """The live connection; waits (up to `connect_timeout`) while one is being made.

        A server that is down and waiting to retry may be tried now, once, for this call
        (`Reconnects.call_may_try`); else raises `ServerUnavailable` at once.
        """
        with anyio.move_on_after(self._connect_timeout):
            seen = self._retries.ended
            while True:
                changed = self._changed
                conn = self.live
                if conn is not None:
                    return conn
                state = self._state
                if state.state == "stopped":
                    raise NodeStopped(f"MCP server {self._name!r} is not running", node=self._name)
                if state.state == "failed" and not self._retries.call_may_try(seen):
                    said = self._retries.unavailable(self._name, state)
                    raise ServerUnavailable(said, node=self._name)
                await changed.wait()
        raise ServerUnavailable(
            f"MCP server {self._name!r} did not become ready within {self._connect_timeout:g} s "
            f"(state: {self._state.state})",
            node=self._name,
        )

    async def on_live(self, attempt: Callable[[Connection], Awaitable[_T]]) -> _T:
        """`attempt(conn)` on the live connection (`ready_connection`), and once more on the
        next if it raised `ConnectionLost` for the server no longer knew the session
        (`Connection.expired`). For requests that may go twice (reads): the one refused was
        not read, but one in flight beside it may have been."""
        conn = await self.ready_connection()
        try:
            return await attempt(conn)
        except ConnectionLost:
            if conn.expired is None:
                raise
        return await attempt(await self.ready_connection())

    async def fetch_listing(self, client: Client) -> list[mcp_types.Tool]:
        """Every page of the server's tool list (an entry that is no tool left out, with a
        warning: `tool_listing`)."""
        return await self._listing.fetch(client)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Own the session until cancelled: connect, serve, and reconnect when it is lost.

        Signals `task_status.started()` once the first attempt settled (ready, or failed and
        waiting to retry). Never raises for the server's sake; only cancellation ends it.
        """
        if self._running:
            raise RuntimeError(f"MCP toolkit {self._name!r} is already running")
        self._running = True
        try:
            async with anyio.create_task_group() as owner:
                owner.start_soon(self._hear_shutdown)
                await self._own(task_status)
        finally:
            self._running = False
            self._conn = None
            self._set_state("stopped")

    async def _hear_shutdown(self) -> None:
        """Label the live session's end as the owner's doing the moment `run()` is cancelled.

        A task beside the session, not a handler inside it: a transport that fails cancels the
        session's tasks too, and that is the server going away. Both tasks hear an owner's
        cancellation in one pass of the loop, before a call it cuts off can wake.
        """
        try:
            await anyio.sleep_forever()
        finally:
            if self._conn is not None:
                self._conn.shutting_down()

    async def _own(self, task_status: anyio.abc.TaskStatus[None]) -> None:
        """`run()`'s loop: a session, then the next once it is lost (after a backoff)."""
        settled = False
        attempts = 0
        retries = self._retries = self._new_retries()

        def settle() -> None:
            nonlocal settled
            if not settled:
                settled = True
                task_status.started()

        while True:
            # A retry keeps the count of failed attempts: the node is still failing until
            # this one succeeds (a status shows it so, whatever moment it is read at).
            state = "connecting" if attempts == 0 else "reconnecting"
            self._set_state(state, failures=retries.failing)
            attempts += 1
            conn = Connection()
            tail = StderrTail()
            began = anyio.current_time()
            ready_at: float | None = None

            def on_ready() -> None:
                nonlocal ready_at
                ready_at = anyio.current_time()
                settle()

            needs_login = False
            try:
                reason = await self._connect_and_serve(conn, tail, on_ready)
            except Exception as exc:
                login = find_authorization_required(exc)
                needs_login = login is not None
                said = login or find_error(exc, AuthorizationServerFailed)  # says it all
                reason = str(said) if said is not None else conn.lost or describe_error(exc)
                reason = SentCredentials.of(self._config).mask(reason)  # e.g. the URL's password
            finally:
                self._conn = None
                conn.close()

            if ready_at is None:
                ended = conn.stdio.how_it_ended() if conn.stdio is not None else ""
                # Not what is told of one attempt's end and may not be of the next's.
                cause = reason.removesuffix(ended)
                if ended not in reason:  # "; it exited with status 1", unless said already
                    reason += ended
                if tail:
                    reason = f"{reason} (stderr: {tail})"
                took = anyio.current_time() - began
                delay = retries.attempt_failed(
                    reason, needs_login=needs_login, took=took, cause=cause
                )
                failed = True
            else:
                lived = anyio.current_time() - ready_at
                delay = retries.session_lost(reason, lived=lived)
                failed = delay > 0
            self._state = dataclasses.replace(self._state, last_error=reason)
            if failed:
                retry_at = _now() + timedelta(seconds=delay)
                self._set_state("failed", failures=retries.failing, retry_at=retry_at)
                settle()
            await retries.wait(delay)

    def _new_retries(self) -> Reconnects:
        # A server this node starts (stdio) is not tried early: see `reconnects`.
        spawned = self._target is None and self._config.kind == "stdio"
        return Reconnects(self._backoff, self._log, early=not spawned)

    async def _connect_and_serve(
        self, conn: Connection, tail: StderrTail, on_ready: Callable[[], None]
    ) -> str:
        """Connect and serve until the session is lost; returns why. Raises if connecting fails."""
        timeout = self._connect_timeout
        # One scope spans the whole session: its deadline bounds connecting, and cancelling it
        # (`conn.drop`) ends the session from any task.
        connect_deadline = conn.scope.deadline = anyio.current_time() + timeout
        with conn.scope:
            async with (
                self._connected_client(conn, tail) as client,
                anyio.create_task_group() as tg,
            ):
                conn.background = tg
                conn.client = client
                _results_unchecked(client)
                if (
                    self._in_flight is not None
                    and client.protocol_version in MODERN_PROTOCOL_VERSIONS
                ):
                    conn.stamp_passed_through = self._in_flight.declare_per_call(client.session)
                # Adopted before `ready`, so no call can meet a half-built routing map.
                listing = await self.fetch_listing(client)
                announce = self._adopt_listing(listing, client.server_capabilities)
                conn.scope.deadline = math.inf
                self._conn = conn
                self._capabilities = client.server_capabilities
                version = client.protocol_version
                self._set_state("ready", protocol_version=version)
                self._retries.connected(version)
                on_ready()
                await announce()
                if version not in MODERN_PROTOCOL_VERSIONS:
                    await self._catalog_may_have_changed(client.server_capabilities)
                tg.start_soon(self._refresh_loop, conn, client)
                wanted = _announced_lists(client.server_capabilities)
                if version in MODERN_PROTOCOL_VERSIONS and wanted:
                    tg.start_soon(self._listen_loop, conn, client, wanted)
                if self._serve_connection is not None:
                    tg.start_soon(self._serve_connection, conn, client)
                await anyio.sleep_forever()
        if self._conn is not conn and anyio.current_time() >= connect_deadline:
            raise TimeoutError(f"no handshake and tool list within {timeout:g} s")
        return conn.lost or "the session ended"

    @asynccontextmanager
    async def _connected_client(self, conn: Connection, tail: StderrTail) -> AsyncGenerator[Client]:
        async with AsyncExitStack() as stack:
            try:
                client = await stack.enter_async_context(self._client(conn, tail))
            except Exception as exc:
                refusal = find_error(exc, MCPError)  # the transport's task group wraps it
                if refusal is None or self._config.protocol != "auto" or self._mode != "legacy":
                    raise
                self._log.info("the server refused the 2025-11-25 handshake (%s): probing", refusal)
                self._mode = "auto"
                client = await stack.enter_async_context(self._client(conn, tail))
            yield client

    def _client(self, conn: Connection, tail: StderrTail) -> Client:
        target = self._target
        server: Server[Any] | MCPServer | Transport
        if isinstance(target, Server | MCPServer):
            server = cast(Server[Any] | MCPServer, target)
        else:
            if target is None and self._config.kind == "http":
                conn.http = HttpLink()
            elif target is None and self._config.kind == "stdio":
                conn.stdio = StdioLink()
            make = target or partial(
                config_transport,
                self._config,
                name=self._name,
                log=self._log,
                stderr_tail=tail,
                in_flight=self._in_flight,
                link=conn.http,
                stdio_link=conn.stdio,
                on_lost=conn.drop,
                on_forgotten=conn.forgotten,
                # Asking for the tools settles it: a request the server no longer knows the
                # session of is `forgotten`.
                on_doubt=conn.request_refresh,
            )
            server = watch_transport(make(), conn.closed_by_server, conn.tasks.heard)
        return Client(
            server,
            mode=self._mode,
            cache=None,  # the owner keeps the listing; a refresh must reach the server
            message_handler=partial(self._on_message, conn),
            logging_callback=self._on_server_log,
            # 2026-07-28 servers log only to requests that opt in: take every level, so that
            # whoever hears a call's messages (`on_server_log`) can filter for its own client.
            log_level="debug",
            client_info=_CLIENT_INFO,
            **self._client_options,
        )

    async def _catalog_may_have_changed(self, capabilities: mcp_types.ServerCapabilities) -> None:
        """A new handshake-era session: the server's prompts and resources are new to the
        owner's clients (the server came up after them) or may have changed meanwhile (it
        restarted), which it tells no new session; the owner hears of a possible change. (On
        2026-07-28 every listen stream opened says so.)"""
        if capabilities.prompts is not None:
            await self._on_list_changed("prompts")
        if capabilities.resources is not None:
            await self._on_list_changed("resources")

    async def _refresh_loop(self, conn: Connection, client: Client) -> None:
        async for _ in conn.refresh_receive:
            try:
                with anyio.fail_after(self._config.timeout):
                    listing = await self.fetch_listing(client)
            except (MCPError, TimeoutError, ValidationError) as exc:
                self._log.warning("could not refresh the tool list: %s", describe_error(exc))
                continue
            await self._adopt_listing(listing, client.server_capabilities)()

    async def _listen_loop(
        self, conn: Connection, client: Client, wanted: frozenset[_ListKind]
    ) -> None:
        # 2026-07-28 servers announce changes only on a `subscriptions/listen` stream.
        while True:
            try:
                async with client.listen(
                    tools_list_changed="tools" in wanted,
                    prompts_list_changed="prompts" in wanted,
                    resources_list_changed="resources" in wanted,
                ) as subscription:
                    honored = subscription.honored
                    if not (
                        honored.tools_list_changed
                        or honored.prompts_list_changed
                        or honored.resources_list_changed
                    ):
                        return
                    # No replay: whatever changed before the stream was acknowledged (since the
                    # listing, or while a dropped stream was down) is only seen by refetching,
                    # so the owner hears of a possible change at once.
                    conn.request_refresh()
                    if honored.prompts_list_changed:
                        await self._on_list_changed("prompts")
                    if honored.resources_list_changed:
                        await self._on_list_changed("resources")
                    async for event in subscription:
                        if isinstance(event, ToolsListChanged):
                            conn.request_refresh()
                        elif isinstance(event, PromptsListChanged):
                            await self._on_list_changed("prompts")
                        elif isinstance(event, ResourcesListChanged):
                            await self._on_list_changed("resources")
            except (ListenNotSupportedError, MCPError) as exc:
                self._log.info("no list_changed subscription: %s", describe_error(exc))
                return
            except SubscriptionLost as exc:
                self._log.info("list_changed subscription lost: %s", exc)
            await anyio.sleep(_RELISTEN_DELAY)

    async def _on_message(self, conn: Connection, message: IncomingMessage) -> None:
        # On 2026-07-28 the SDK also hands listen-stream events here: the listen loop has them.
        listened = (
            conn.client is not None and conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS
        )
        if isinstance(message, mcp_types.ToolListChangedNotification):
            conn.request_refresh()
        elif isinstance(message, mcp_types.PromptListChangedNotification) and not listened:
            await self._on_list_changed("prompts")
        elif isinstance(message, mcp_types.ResourceListChangedNotification) and not listened:
            await self._on_list_changed("resources")
        elif isinstance(message, mcp_types.ResourceUpdatedNotification):
            # Both eras: on 2026-07-28 the listen stream's events arrive here too.
            if self._on_resource_updated is not None:
                await self._on_resource_updated(message.params.uri)
        elif isinstance(message, mcp_types.ElicitCompleteNotification):
            # Its caller's only (`CallsInFlight.elicitation_complete`), else nobody's.
            if self._in_flight is not None:
                await self._in_flight.elicitation_complete(message.params.elicitation_id)
        elif isinstance(message, Exception):
            said = SentCredentials.of(self._config).mask(describe_error(message))
            self._log.warning("transport error: %s", said)

    async def on_raw_notification(self, conn: Connection, message: Mapping[str, Any]) -> None:
        """A notification that came on a passed-through call's stream (`forward`), handled as
        if the SDK client had handed it over."""
        try:
            typed = mcp_types.server_notification_adapter.validate_python(message)
        except ValidationError:
            self._log.debug("ignored a malformed notification: %.200r", message)
            return
        await self._on_message(conn, typed)

    def note_server_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        """Write a log message of the server to the node's log."""
        source = f" [{params.logger}]" if params.logger else ""
        level = _LOG_LEVELS.get(params.level, logging.INFO)
        # The server's words go to the operator's terminal and log files: as text only.
        self._log.log(level, "server log%s: %s", printable(source), printable(str(params.data)))

    async def _on_server_log(self, params: mcp_types.LoggingMessageNotificationParams) -> None:
        self.note_server_log(params)
        if self._relay_log is not None:
            try:
                await self._relay_log(params)
            except Exception:  # a listener's bug must not touch the session
                self._log.exception("relaying a server log message failed")

    def _set_state(
        self,
        state: HealthState,
        *,
        protocol_version: str | None = None,
        failures: int = 0,
        retry_at: datetime | None = None,
    ) -> None:
        self._state = NodeHealth(
            node=self._name,
            state=state,
            since=_now(),
            tool_count=0,
            last_error=self._state.last_error,
            failures=failures,
            retry_at=retry_at,
            protocol_version=protocol_version,
        )
        # Wake everyone waiting for a change, then start a fresh event for the next one.
        self._changed.set()
        self._changed = anyio.Event()
