"""What the SDK (mcp 2.3) says of a request it could not finish, told apart from what a
server says.

The SDK answers such a request itself with CONNECTION_CLOSED (-32000), a code JSON-RPC leaves
to servers and many use for their own errors: its own messages tell them apart.
"""

from __future__ import annotations

import mcp_types
from mcp import MCPError

__all__ = ["SDK_TOO_LARGE", "closed_by_sdk", "connection_failed"]

_SDK_CLOSED = frozenset(
    {"Connection closed", "SSE stream ended without a response",
     "server answered a request with 202 Accepted"}
)  # fmt: skip
_SSE_FAILED = "SSE stream failed"
"""How it begins saying a response stream it could not read (from a live server)."""
SDK_TOO_LARGE = "SSE stream failed: Server-sent event exceeded"
"""How it says an event was over `max_sse_event_size` (httpx2)."""


def closed_by_sdk(exc: MCPError) -> bool:
    """Whether `exc` is the SDK's word that a request could not be finished, not a server's
    own error answer with code -32000 (relayed as it is, its connection kept)."""
    return exc.code == mcp_types.CONNECTION_CLOSED and (
        exc.message in _SDK_CLOSED or exc.message.startswith(_SSE_FAILED)
    )


def connection_failed(exc: MCPError) -> bool:
    """Whether a call's error means the connection failed, not just this call: an HTTP
    response stream the SDK could not parse ("SSE stream failed: ...", e.g. a result over
    `max_message_bytes`) came from a live server, so that call alone failed."""
    return closed_by_sdk(exc) and not exc.message.startswith(_SSE_FAILED)
