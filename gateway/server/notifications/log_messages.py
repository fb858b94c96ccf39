"""Log messages for our MCP client: the levels it takes, and a downstream server's relayed.

A handshake-era client (2025-11-25) gets the levels from the one it last set with
`logging/setLevel` up, on its own connection (`set_level`); every level until it sets one, as
the SDK's servers send them (the spec names no default). The servers are asked for the most
verbose level any client set (`ServersLogLevel`). A 2026-07-28 client gets what the
request opted in to (`_meta`). A downstream server's message during a proxied request goes to
that request's client as the server sent it (level, logger, data), related to the request, so
streamable HTTP carries it on the request's stream.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any, get_args

import anyio
import mcp_types as types
from mcp.server.connection import Connection, allowed_log_levels
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkits import ServerLogHandler, SetsServerLogLevel

from ..connection import connection_of

__all__ = [
    "NOTIFY_TIMEOUT",
    "ServersLogLevel",
    "client_log_levels",
    "log_levels",
    "log_relay",
    "send_log",
    "set_level",
]

NOTIFY_TIMEOUT = 5.0
"""A notification that cannot be written in this long is dropped: the work never waits on it."""

log = logging.getLogger(__name__)

_LEVELS: tuple[types.LoggingLevel, ...] = get_args(types.LoggingLevel)
_EVERY_LEVEL = frozenset(_LEVELS)
_SET_LEVEL = "agent-gateway/log-levels"
"""Where a handshake-era connection's `state` keeps the levels its client set."""


def set_level(connection: Connection, level: types.LoggingLevel) -> None:
    """The client on `connection` takes log messages at `level` and up from now on."""
    connection.state[_SET_LEVEL] = frozenset(_LEVELS[_LEVELS.index(level) :])


class ServersLogLevel:
    """The most verbose level any client set, asked of the nodes' servers: a server may send
    only what it chooses until a level is set (the spec lets it), so a client's `debug` must
    reach it. Each client still gets its own levels alone (`set_level`)."""

    def __init__(self, nodes: Iterable[object]) -> None:
        self._nodes = [node for node in nodes if isinstance(node, SetsServerLogLevel)]
        self._level: types.LoggingLevel | None = None

    async def asked(self, level: types.LoggingLevel) -> None:
        """A client set `level`: the servers are told if it is more verbose than any before."""
        if self._level is not None and _LEVELS.index(level) >= _LEVELS.index(self._level):
            return
        self._level = level
        async with anyio.create_task_group() as tg:
            for node in self._nodes:
                tg.start_soon(node.set_log_level, level)


def client_log_levels(ctx: ServerRequestContext[Any, Any]) -> frozenset[types.LoggingLevel]:
    """The levels the client of `ctx` takes log messages at, for this request."""
    return log_levels(ctx.protocol_version, ctx.meta, connection_of(ctx))


def log_levels(
    protocol_version: str, meta: Mapping[str, Any] | None, connection: Connection | None = None
) -> frozenset[types.LoggingLevel]:
    """The levels a `protocol_version` client takes log messages at, for a request with `meta`
    on `connection` (a handshake-era client's: the level it set there, if it did)."""
    if protocol_version in MODERN_PROTOCOL_VERSIONS:
        return allowed_log_levels(protocol_version, meta)
    if connection is None:
        return _EVERY_LEVEL
    return connection.state.get(_SET_LEVEL, _EVERY_LEVEL)


async def send_log(
    ctx: ServerRequestContext[Any, Any], params: types.LoggingMessageNotificationParams
) -> None:
    """One log message to the client of `ctx`, related to its request (bounded, never raises
    for the client's sake; the caller checks the level)."""
    with anyio.move_on_after(NOTIFY_TIMEOUT) as scope:
        await ctx.session.send_notification(
            types.LoggingMessageNotification(params=params), related_request_id=ctx.request_id
        )
    if scope.cancelled_caught:
        log.warning(
            "dropped a log message for request %s: the client is not reading", ctx.request_id
        )


def log_relay(ctx: ServerRequestContext[Any, Any]) -> ServerLogHandler:
    """Relays a downstream server's log messages to the client of `ctx` at the levels it takes."""
    levels = client_log_levels(ctx)

    async def relay(params: types.LoggingMessageNotificationParams) -> None:
        if params.level in levels:
            await send_log(ctx, params)

    return relay
