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
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkits import FollowsChanges, HasServerLogs, in_background

from ..engine import Gateway
from ..limits import PerNode
from .client_requests.forwarding import Here
from .client_requests.parked_calls import ParkedCalls
from .connection import connection_of
from .notifications.list_changes import ChangeRelay
from .notifications.server_logs import ServerLogRelay

__all__ = [
    "ClientQuotas",
    "Serving",
    "ServingNow",
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

    A handshake-era client is its connection. A 2026-07-28 request arrives on a connection of
    its own, so over stdio (and in-process) it is the run's one client, while over stateless
    HTTP nothing ties its requests together: each is a client of its own there, and only the
    nodes' own limits bound them all.
    """

    def __init__(self) -> None:
        self._by_connection: WeakKeyDictionary[object, PerNode] = WeakKeyDictionary()
        self._sole: PerNode | None = None

    def of(self, ctx: ServerRequestContext[Any, Any], gateway: Gateway) -> PerNode:
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and ctx.request is None:
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


def client_quota(ctx: ServerRequestContext[Any, Any], gateway: Gateway) -> PerNode:
    """The calling client's share of the nodes (see `ClientQuotas`)."""
    state = serving(ctx)
    return gateway.client_quota() if state is None else state.quotas.of(ctx, gateway)


def lifespan_for(
    nodes: Sequence[FollowsChanges],
    now: ServingNow | None = None,
    logging_nodes: Sequence[HasServerLogs] = (),
) -> Callable[[Server[Any]], AbstractAsyncContextManager[Serving]]:
    """The server lifespan that runs a `Serving`, relaying the changes of `nodes` and the log
    messages `logging_nodes`' servers send outside calls (and telling `now` while it runs)."""

    @asynccontextmanager
    async def lifespan(_server: Server[Any]) -> AsyncGenerator[Serving]:
        relay = ChangeRelay()
        logs = ServerLogRelay(lambda: relay.connections)
        try:
            async with in_background(relay.run) as tg:
                await tg.start(logs.run)
                stop_watching = relay.watch(nodes)
                stop_logs = logs.watch(logging_nodes)
                try:
                    here = getattr(_server, "here", None)
                    state = Serving(
                        ParkedCalls(tg, here if isinstance(here, Here) else None), relay
                    )
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
