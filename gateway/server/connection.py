"""The connection a request arrived on: the one adapter over an SDK private."""

from __future__ import annotations

from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext

__all__ = ["connection_of"]


def connection_of(ctx: ServerRequestContext[Any, Any]) -> Connection | None:
    """The connection a request arrived on.

    SDK private (mcp 2.3.0): the low-level request context does not expose it yet (the SDK's
    context rework will), so this, the one place we look, reads `ServerSession._connection`.
    `Connection` itself is public and its `exit_stack` is the documented place for
    per-connection cleanup; None if the SDK no longer carries it where we look.
    """
    connection = getattr(ctx.session, "_connection", None)
    return connection if isinstance(connection, Connection) else None
