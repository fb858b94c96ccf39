"""Telling our clients when the proxied nodes' tools, prompts or resources change.

Each exposed MCP node says when its server's lists changed (`subscribe`, `subscribe_prompts`,
`subscribe_resources`). The relay waits `DEBOUNCE` s for more (a server that changes several
things at once, or several nodes reconnecting, makes one notification per list), then tells
every client of its serving run:

- handshake-era connections (2025-11-25) get `notifications/{tools,prompts,resources}/
  list_changed` on their standalone channel (the stdio pipe, or the HTTP GET stream). They are
  registered (`ChangeRelay.register`, from server middleware) as their requests arrive, and
  dropped when they close;
- 2026-07-28 clients get it on the `subscriptions/listen` streams they open (the SDK's
  `ListenHandler`, over this relay's own bus).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import suppress
from functools import partial
from typing import Any, Literal

import anyio
import anyio.abc
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkits import FollowsChanges, ListChangedCallback

from ..connection import connection_of
from ..transports.auth import authenticated_subject
from .log_messages import NOTIFY_TIMEOUT

__all__ = ["DEBOUNCE", "ChangeRelay", "ListKind"]

DEBOUNCE = 0.2

ListKind = Literal["tools", "prompts", "resources"]

_EVENTS: dict[ListKind, ServerEvent] = {
    "tools": ToolsListChanged(),
    "prompts": PromptsListChanged(),
    "resources": ResourcesListChanged(),
}

log = logging.getLogger(__name__)


class ChangeRelay:
    """The list changes of some nodes, debounced, for the clients of one serving run."""

    def __init__(self, *, delay: float = DEBOUNCE) -> None:
        self._delay = delay
        self._bus = InMemorySubscriptionBus()
        self.listen = ListenHandler(self._bus)
        """Serves `subscriptions/listen` for this run's 2026-07-28 clients."""
        self._connections: set[Connection] = set()
        self._anonymous: set[Connection] = set()
        """Those of them that came without a token (stdio, a tokenless HTTP server)."""
        self._pending: set[ListKind] = set()
        # One queued wake-up is enough: the flush that serves it takes every pending kind.
        self._wake_send, self._wake = anyio.create_memory_object_stream[None](1)

    def watch(self, nodes: Sequence[FollowsChanges]) -> Callable[[], None]:
        """Follow the nodes' changes; returns the function that stops following them."""
        undo: list[Callable[[], None]] = []
        for node in nodes:
            undo += [
                node.subscribe(self._changed("tools")),
                node.subscribe_prompts(self._changed("prompts")),
                node.subscribe_resources(self._changed("resources")),
            ]

        def stop() -> None:
            for unsubscribe in undo:
                unsubscribe()

        return stop

    @property
    def connections(self) -> Collection[Connection]:
        """The handshake-era connections with a standalone channel, open now."""
        return self._connections

    @property
    def anonymous_connections(self) -> Collection[Connection]:
        """Those of `connections` that came without a token: what belongs to no client (a
        server's log outside calls) may go to them; clients with tokens may be different
        people."""
        return self._anonymous

    def register(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """Remember the handshake-era connection of `ctx` until it closes."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return
        connection = connection_of(ctx)
        if (
            connection is None
            or connection in self._connections
            or not connection.has_standalone_channel
        ):
            return
        self._connections.add(connection)
        if authenticated_subject() is None:
            self._anonymous.add(connection)
        # An exit function, not `callback`: its wrapper would cost ~0.5 kB per connection.
        connection.exit_stack.push(partial(self._closed, connection))

    def _closed(self, connection: Connection, *_exc_info: object) -> None:
        self._connections.discard(connection)
        self._anonymous.discard(connection)

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Announce changes until cancelled."""
        task_status.started()
        async for _ in self._wake:
            await anyio.sleep(self._delay)  # let the rest of a burst arrive
            kinds, self._pending = self._pending, set()
            for kind in sorted(kinds):
                await self._announce(kind)

    async def publish(self, event: ServerEvent) -> None:
        """Hand `event` to this run's listen streams (each takes what its client asked for)."""
        await self._bus.publish(event)

    def close(self) -> None:
        self.listen.close()
        self._wake_send.close()
        self._wake.close()

    def _changed(self, kind: ListKind) -> ListChangedCallback:
        async def changed(_node: str) -> None:
            self._pending.add(kind)
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError):
                self._wake_send.send_nowait(None)

        return changed

    async def _announce(self, kind: ListKind) -> None:
        log.info("the proxied %s changed; telling the clients", kind)
        await self._bus.publish(_EVENTS[kind])
        for connection in list(self._connections):
            with anyio.move_on_after(NOTIFY_TIMEOUT):
                match kind:
                    case "tools":
                        await connection.send_tool_list_changed()
                    case "prompts":
                        await connection.send_prompt_list_changed()
                    case "resources":
                        await connection.send_resource_list_changed()
