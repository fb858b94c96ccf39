"""What the SDK knows of a request but does not expose on its low-level context yet: the
connection it arrived on, and whether its client cancelled it. The one adapter over SDK
privates."""

from __future__ import annotations

from typing import Any

import anyio
from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext

__all__ = ["cancel_requested", "connection_of"]


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The connection a request arrived on.

    SDK private (mcp 2.3.0): the low-level request context does not expose it yet (the SDK's
    context rework will), so this, the one place we look, reads `ServerSession._connection`.
    `Connection` itself is public and its `exit_stack` is the documented place for
    per-connection cleanup; None if the SDK no longer carries it where we look.
    """
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None


def cancel_requested(ctx: ServerRequestContext[Any, Any]) -> anyio.Event | None:
    """Set when the client cancels the request (`notifications/cancelled`): not when its
    connection drops or its session closes, which cancel the handler just the same.

    SDK private (mcp 2.3.0): the SDK's `Context.cancel_requested` is this event, but handlers
    get a `ServerRequestContext`, whose `ServerSession` holds the request's dispatch context
    as `_request_outbound`. None if the SDK no longer carries it where we look. A 2026-07-28
    client over HTTP never sets it: its wire has no cancel but closing the response stream.
    """
    dispatch = getattr(ctx.session, "_request_outbound", None)
    event = getattr(dispatch, "cancel_requested", None)
    return event if isinstance(event, anyio.Event) else None
