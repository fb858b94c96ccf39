"""What one serving run owns: the task group of parked requests, the change relay, and each
client's share of the nodes.

A run is the server's lifespan: one stdio connection, one HTTP app, one in-process client.
Handlers reach the run's state through `serving(ctx)`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from starlette.requests import Request
from starlette.types import Scope

from toolkits import FollowsChanges, HasServerLogs, in_background

from ..engine import Gateway
from ..limits import PerNode
from .client_requests.forwarding import Here
from .client_requests.parked_calls import ParkedCalls
from .connection import connection_of
from .notifications.list_changes import ChangeRelay
from .notifications.server_logs import ServerLogRelay
from .transports.auth import authenticated_subject

__all__ = [
    "ClientQuotas",
    "Serving",
    "ServingNow",
    "caller_of",
    "client_quota",
    "lifespan_for",
    "register_connections",
    "serving",
]


@dataclass(frozen=True, slots=True)
class Serving:
    parked: ParkedCalls
    relay: ChangeRelay
    quotas: ClientQuotas = field(default_factory=lambda: ClientQuotas())


def serving(ctx: ServerRequestContext[Any, Any]) -> Serving | None:
    state = ctx.lifespan_context
    return state if isinstance(state, Serving) else None


class ServingNow:
    """The serving run in progress, for what serves requests before the SDK's handlers do and
    has no `ctx` to find it by (`served.pass_through`)."""

    def __init__(self) -> None:
        self.current: Serving | None = None


class ClientQuotas:
    """Each client's share of the nodes (`gateway.limits`), found by what identifies it.

    A handshake-era client is its connection (over HTTP, its session). A 2026-07-28 request
    over stdio (or in-process) comes from the run's one client. Over HTTP, a request on no
    session (every 2026-07-28 request, and a 2025-era one served statelessly) carries nothing
    that ties it to the caller's other requests but who sent it (`caller_of`): the
    authenticated principal when there is one, else the address it came from. So unless they
    send tokens of their own, all such clients on one host share one quota, as do all that
    come through one reverse proxy. The 2026-07-28 `clientInfo` is no identity: it names the
    client's software (every SDK client sends the same), and says what the client claims.

    A caller's quota is dropped once idle, when many have gathered: a fresh one stands in.
    """

    def __init__(self) -> None:
        self._by_connection: WeakKeyDictionary[object, PerNode] = WeakKeyDictionary()
        self._by_caller: dict[str, PerNode] = {}
        self._sweep_at = _CALLERS_KEPT
        self._sole: PerNode | None = None

    def of(self, ctx: ServerRequestContext[Any, Any], gateway: Gateway) -> PerNode:
        request = ctx.request
        if isinstance(request, Request):  # over HTTP
            if (
                ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
                or MCP_SESSION_ID_HEADER not in request.headers
            ):
                return self.of_caller(caller_of(request.scope), gateway)
        elif ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return self.sole(gateway)
        return self.of_connection(connection_of(ctx) or ctx.session, gateway)

    def sole(self, gateway: Gateway) -> PerNode:
        """The share of the run's one 2026-07-28 client (over stdio, or in-process)."""
        if self._sole is None:
            self._sole = gateway.client_quota()
        return self._sole

    def of_connection(self, connection: object, gateway: Gateway) -> PerNode:
        """The share of the client on `connection` (a handshake-era client is its connection)."""
        quota = self._by_connection.get(connection)
        if quota is None:
            quota = self._by_connection[connection] = gateway.client_quota()
        return quota

    def of_caller(self, caller: str, gateway: Gateway) -> PerNode:
        """The share of the HTTP caller `caller` (`caller_of`) of requests on no session."""
        quota = self._by_caller.get(caller)
        if quota is None:
            if len(self._by_caller) >= self._sweep_at:
                self._drop_idle()
            quota = self._by_caller[caller] = gateway.client_quota()
        return quota

    @property
    def callers(self) -> int:
        """Callers' quotas kept now."""
        return len(self._by_caller)

    def _drop_idle(self) -> None:
        # A quota handed out but not yet taken looks idle too: its caller may have two for a
        # moment, which bounds it a little less, never more.
        self._by_caller = {caller: q for caller, q in self._by_caller.items() if not q.idle}
        self._sweep_at = max(_CALLERS_KEPT, 2 * len(self._by_caller))  # a sweep per as many


_CALLERS_KEPT = 256
"""Callers' quotas kept before the idle ones are dropped."""


def caller_of(scope: Scope) -> str:
    """Who sent an HTTP request on no session, for its quota: the authenticated principal
    (an OAuth subject, a static token's label), else the client's address."""
    subject = authenticated_subject()
    if subject is not None:
        return f"principal {subject}"
    client = scope.get("client")
    return f"address {client[0]}" if client else "address unknown"


def client_quota(ctx: ServerRequestContext[Any, Any], gateway: Gateway) -> PerNode:
    """The calling client's share of the nodes (see `ClientQuotas`)."""
    state = serving(ctx)
    return gateway.client_quota() if state is None else state.quotas.of(ctx, gateway)


def lifespan_for(
    nodes: Sequence[FollowsChanges],
    now: ServingNow | None = None,
    logging_nodes: Sequence[HasServerLogs] = (),
    yield_after: float | None = None,
) -> Callable[[Server[Any]], AbstractAsyncContextManager[Serving]]:
    """The server lifespan that runs a `Serving`, relaying the changes of `nodes` and the log
    messages `logging_nodes`' servers send outside calls (and telling `now` while it runs);
    `yield_after`: its parked requests' (`ParkedCalls`)."""

    @asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncGenerator[Serving]:
        relay = ChangeRelay()
        logs = ServerLogRelay(lambda: relay.anonymous_connections)
        try:
            async with in_background(relay.run) as tg:
                await tg.start(logs.run)
                stop_watching = relay.watch(nodes)
                stop_logs = logs.watch(logging_nodes)
                try:
                    here = getattr(_server, "here", None)
                    parked = ParkedCalls(tg, here if isinstance(here, Here) else None, yield_after)
                    state = Serving(parked, relay)
                    if now is not None:
                        now.current = state
                    yield state
                finally:
                    if now is not None:
                        now.current = None
                    stop_watching()
                    stop_logs()
        finally:
            relay.close()
            logs.close()

    return lifespan


async def register_connections(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: hands each request's connection to its run's change relay."""
    try:
        return await call_next(ctx)
    finally:
        state = serving(ctx)
        if state is not None and ctx.request_id is not None and ctx.method != "ping":
            state.relay.register(ctx)
