"""Server middleware refusing requests the SDK (mcp 2.3.0) takes but the spec does not mean.

- A second `initialize` on a connection whose first one was answered: -32600 "already
  initialized" (as the TypeScript SDK answers it over HTTP). The SDK would answer it and
  renegotiate the protocol version mid-session, under calls already running. One that
  failed may be sent again.
- A pagination cursor on a list the gateway serves whole (tools, prompts, resources, resource
  templates, tasks: it never gives a `nextCursor`, so no cursor is one of its own): -32602,
  which the spec says an invalid cursor SHOULD get. The SDK's handlers ignore it and answer
  the first page again, which a client paging on would take for more.
- -32601 Method not found: the SDK puts the method, as sent, in `data`, however long; it is
  cut to `MAX_ECHOED` characters, as every error quotes a client's input.
- -32602 for params that are not the method's: the SDK says only "Invalid request
  parameters" (`data: ""`); the error names each field wrong and why, in a line
  (`validation_brief`), as the gateway's own refusals do; one before the handshake (stdio)
  says that the session is not initialized yet.

`readable_trace_context`, before the SDK's OpenTelemetry middleware, drops a `_meta`
`traceparent`, `tracestate` or `baggage` that is no string (`"baggage": 7`), which the SDK's
reading of them fails on with an internal error: ignored, as a malformed string one is.
"""

from __future__ import annotations

from typing import Any, cast

import mcp_types as types
from mcp.server import Server
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolkits import validation_brief

from ..catalog import MAX_ECHOED, echoed
from ..trace import TRACE_CONTEXT_KEYS
from .connection import connection_of

__all__ = [
    "ALREADY_INITIALIZED",
    "NOT_INITIALIZED",
    "SERVED_WHOLE",
    "readable_trace_context",
    "request_checks",
]

ALREADY_INITIALIZED = "Invalid Request: already initialized (a session is initialized once)"
SERVED_WHOLE = frozenset(
    {"tools/list", "prompts/list", "resources/list", "resources/templates/list", "tasks/list"}
)
"""The lists the gateway serves in one page."""


def request_checks(server: Server[Any]) -> ServerMiddleware[Any]:
    """The middleware for `server` (the outermost: what it refuses, nothing else sees)."""

    async def check(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        method = ctx.method
        if method == "initialize":
            connection = connection_of(ctx)
            if connection is not None and connection.client_params is not None:
                raise MCPError(types.INVALID_REQUEST, ALREADY_INITIALIZED)
        elif method in SERVED_WHOLE and server.get_request_handler(method) is not None:
            cursor = ctx.params.get("cursor") if ctx.params is not None else None
            if isinstance(cursor, str):  # another type: the SDK's validation refuses it
                raise MCPError(
                    types.INVALID_PARAMS,
                    f"Invalid params: cursor {echoed(cursor)} is not one of this server's: it "
                    f"serves {method} in one page, so list again without a cursor",
                )
        try:
            return await call_next(ctx)
        except ValidationError as exc:  # the params, checked by the SDK
            brief = validation_brief(exc, "params")
            raise MCPError(types.INVALID_PARAMS, f"Invalid params: {brief}") from None
        except MCPError as exc:
            if exc.error == _SDK_INVALID_PARAMS and not _initialized(ctx):
                raise MCPError(exc.code, NOT_INITIALIZED) from None
            if (
                exc.code == types.METHOD_NOT_FOUND
                and isinstance(exc.data, str)
                and len(exc.data) > MAX_ECHOED
            ):
                raise MCPError(exc.code, exc.message, exc.data[:MAX_ECHOED] + "...") from None
            raise

    return check


async def readable_trace_context(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware (the outermost): a W3C trace key of the request's `_meta` that is no
    string is dropped, as the SDK's propagators read only strings."""
    meta = cast(dict[str, Any] | None, ctx.meta)
    if meta:
        for key in TRACE_CONTEXT_KEYS:
            if key in meta and not isinstance(meta[key], str):
                del meta[key]
    return await call_next(ctx)


_SDK_INVALID_PARAMS = types.ErrorData(
    code=types.INVALID_PARAMS, message="Invalid request parameters", data=""
)
"""What the SDK answers a request before its connection's handshake, and bad params."""
NOT_INITIALIZED = (
    "Invalid params: the session is not initialized yet: send initialize (then "
    "notifications/initialized) first"
)


def _initialized(ctx: ServerRequestContext[Any, Any]) -> bool:
    connection = connection_of(ctx)
    return connection is None or connection.initialize_accepted
