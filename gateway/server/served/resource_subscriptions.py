"""Proxy mode: resource subscriptions, held at the exposed nodes for the clients that asked.

A handshake-era client (2025-11-25) subscribes with `resources/subscribe` and ends it with
`resources/unsubscribe`; a 2026-07-28 client names the URIs in the `subscriptions/listen`
stream it opens, for as long as the stream lasts. Each URI goes to its node as a read would
(`proxied_resources`), and the node holds one subscription at its server however many clients follow
the URI (`toolkits.HasResourceSubscriptions`).

Updates reach only the clients that follow the URI: `notifications/resources/updated` on a
handshake-era client's connection (with the URI the server named); for 2026-07-28 clients, an
event on the serving run's bus, which its `ListenHandler` delivers to the streams that named
the URI. A connection that closes, or a stream that ends, lets go of what it held; the node
unsubscribes at its server when nobody is left. A client follows at most `MAX_PER_CLIENT` URIs
(a stream names as many); URIs a stream names that cannot be followed (no node serves them, or
their server has no subscriptions) are left out of the filter its acknowledgment honors.
"""

from __future__ import annotations

import logging
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError

from toolkits import HasCatalog, HasResourceSubscriptions, NotOffered, ToolkitError, Unsubscribe

from ..connection import connection_of
from ..notifications.list_changes import ChangeRelay
from ..notifications.log_messages import NOTIFY_TIMEOUT
from ..serving import serving
from .proxied_resources import ProxiedResources
from .relaying import as_mcp_error

__all__ = ["MAX_PER_CLIENT", "ResourceSubscribers"]

MAX_PER_CLIENT = 256
"""URIs one client connection (or one listen stream) may follow at once."""

_HELD = "agent_gateway.resource_subscriptions"
"""The key, in a connection's `state`, of what it follows: URI -> its unsubscribe (None while
being subscribed)."""

log = logging.getLogger(__name__)

_Held = dict[str, Unsubscribe | None]


class ResourceSubscribers:
    """The clients' resource subscriptions, for every serving run of one server."""

    def __init__(self, resources: ProxiedResources) -> None:
        self._resources = resources

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        if connection is None or not connection.has_standalone_channel:
            raise MCPError(
                types.INVALID_REQUEST,
                "this connection cannot carry resource updates (stateless HTTP): use a session",
            )
        held = self._held(connection)
        uri = params.uri
        if uri in held:
            return types.EmptyResult()
        if len(held) >= MAX_PER_CLIENT:
            raise MCPError(
                types.INVALID_REQUEST, f"a client may follow at most {MAX_PER_CLIENT} resources"
            )
        node = await self._resources.route(uri)
        held[uri] = None  # claimed: a second subscribe meanwhile has nothing to do
        try:
            unsubscribe = await _follow(node, uri, _ToConnection(connection))
        except BaseException:
            if uri in held and held[uri] is None:
                del held[uri]
            raise
        if uri in held and held[uri] is None:
            held[uri] = unsubscribe
        else:  # unsubscribed, or the connection closed, meanwhile
            await unsubscribe()
        return types.EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        connection = connection_of(ctx)
        held: _Held | None = connection.state.get(_HELD) if connection is not None else None
        unsubscribe = held.pop(params.uri, None) if held is not None else None
        if unsubscribe is not None:
            await unsubscribe()
        return types.EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        """Serve a 2026-07-28 listen stream, following the URIs it names while it lasts."""
        # Each serving run has its own relay (and bus); the handler is registered once.
        state = serving(ctx)
        if state is None:
            raise MCPError(types.INTERNAL_ERROR, "listen streams are not served outside a run")
        named = list(dict.fromkeys(params.notifications.resource_subscriptions or ()))
        held: list[Unsubscribe] = []
        followed: list[str] = []
        try:
            for uri in named[:MAX_PER_CLIENT]:
                try:
                    node = await self._resources.route(uri)
                    held.append(await _follow(node, uri, _ToStreams(state.relay, uri)))
                except MCPError as exc:
                    log.info("a listen stream cannot follow %r: %s", uri, exc.error.message)
                else:
                    followed.append(uri)
            honored = params.notifications.model_copy(
                update={"resource_subscriptions": followed or None}
            )
            return await state.relay.listen(
                ctx, params.model_copy(update={"notifications": honored})
            )
        finally:
            with anyio.CancelScope(shield=True):  # the stream ends by its handler's cancellation
                for unsubscribe in held:
                    await unsubscribe()

    def _held(self, connection: Connection) -> _Held:
        held: _Held | None = connection.state.get(_HELD)
        if held is None:
            held = connection.state[_HELD] = {}
            connection.exit_stack.push_async_callback(_let_go, held)
        return held


async def _let_go(held: _Held) -> None:
    """A connection closed: end what it followed (one still being subscribed ends itself)."""
    unsubscribes = [unsubscribe for unsubscribe in held.values() if unsubscribe is not None]
    held.clear()
    for unsubscribe in unsubscribes:
        await unsubscribe()


async def _follow(
    node: HasCatalog, uri: str, on_updated: _ToConnection | _ToStreams
) -> Unsubscribe:
    if not isinstance(node, HasResourceSubscriptions):
        raise MCPError(types.INVALID_PARAMS, f"node {node.name!r} offers no resource subscriptions")
    try:
        return await node.subscribe_resource(uri, on_updated)
    except NotOffered as exc:
        raise MCPError(types.INVALID_PARAMS, str(exc)) from exc
    except ToolkitError as exc:
        raise as_mcp_error(node.name, exc) from exc


@dataclass(frozen=True)
class _ToConnection:
    """Tells one handshake-era connection (equal for the same connection: told once)."""

    connection: Connection

    async def __call__(self, uri: str) -> None:
        with (
            anyio.move_on_after(NOTIFY_TIMEOUT),
            suppress(anyio.ClosedResourceError, anyio.BrokenResourceError),
        ):
            await self.connection.send_resource_updated(uri)


@dataclass(frozen=True)
class _ToStreams:
    """Tells a run's listen streams that named `uri` (equal for the same run and URI: the
    node calls it once however many streams named the URI)."""

    relay: ChangeRelay
    uri: str

    async def __call__(self, _updated: str) -> None:
        # The SDK's listen handler matches URIs exactly: a sub-resource's update is told as
        # an update of the URI the stream named.
        await self.relay.publish(ResourceUpdated(self.uri))
