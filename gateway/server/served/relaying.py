"""What relaying the exposed MCP nodes' answers takes, whatever the feature.

- `without_stamp`: the downstream server's own `serverInfo` stamp (2026-07-28 servers put it
  in `_meta`) is not ours to relay; the SDK adds ours.
- `hop_meta`, `forwarded_meta`: the client's `_meta`, carried one gateway further.
- `as_mcp_error`: a node's failure as the MCP error our client receives.
- `relayed_error`: a server's JSON-RPC error to a tool call, as our client receives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY, URL_ELICITATION_REQUIRED, ErrorData
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel

from toolkits import ToolkitError

from ...run_context import HOPS_META_KEY

__all__ = [
    "as_mcp_error",
    "forwarded_meta",
    "hop_meta",
    "incoming_hops",
    "relayed_error",
    "without_stamp",
]

_Model = TypeVar("_Model", bound=BaseModel)


def without_stamp(result: _Model) -> _Model:
    """`result` without the downstream server's `serverInfo` stamp in its `_meta`."""
    meta: dict[str, Any] | None = getattr(result, "meta", None)
    if meta is None or SERVER_INFO_META_KEY not in meta:
        return result
    rest = {key: value for key, value in meta.items() if key != SERVER_INFO_META_KEY}
    return result.model_copy(update={"meta": rest or None})


def incoming_hops(ctx: ServerRequestContext[Any, Any]) -> int:
    """How many gateways the request passed through before us, from its `_meta`."""
    hops = (ctx.meta or {}).get(HOPS_META_KEY, 0)
    return hops if isinstance(hops, int) and hops >= 0 else 0


def hop_meta(ctx: ServerRequestContext[Any, Any]) -> dict[str, Any]:
    """The `_meta` of the node's request for the client's request `ctx` (`forwarded_meta`)."""
    return forwarded_meta(ctx.meta, incoming_hops(ctx))


_ENVELOPE = "io.modelcontextprotocol/"
"""The 2026-07-28 envelope's keys: the client's era, capabilities and log level, which the
node's request states for itself."""
_REWRITTEN = frozenset(("progressToken", HOPS_META_KEY))


def forwarded_meta(meta: Mapping[str, Any] | None, hops: int) -> dict[str, Any]:
    """The `_meta` the node's request carries for a client's request with `meta`, `hops`
    gateways before us: the client's own keys as sent (a vendor's, a trace's `traceparent`:
    the client's trace goes on through us; when we trace, the call's span replaces it with
    its own, a child of the client's), without what each hop writes for itself: the progress
    token, the hop count (one more) and the envelope."""
    sent = (
        {k: v for k, v in meta.items() if k not in _REWRITTEN and not k.startswith(_ENVELOPE)}
        if meta
        else {}
    )
    sent[HOPS_META_KEY] = hops + 1
    return sent


def as_mcp_error(node: str, exc: ToolkitError) -> MCPError:
    return MCPError(types.INTERNAL_ERROR, f"node {node!r} failed: {exc}")


def relayed_error(error: ErrorData | None, protocol_version: str) -> ErrorData | None:
    """The downstream server's JSON-RPC `error` to a client's tool call, as that client gets
    it: as sent (code, message, `data`: a client may act on them, e.g. open the URLs of a
    -32042), except where the client's era has no such error. 2026-07-28 retired -32042 (its
    URL elicitations are asked in input-required rounds, which a handshake-era server does
    not use): such a client gets the error result instead, which names the URLs. None: the
    error result it is (`toolkits.mcp.protocol_error_result`) is the answer."""
    if error is None or (
        error.code == URL_ELICITATION_REQUIRED and protocol_version in MODERN_PROTOCOL_VERSIONS
    ):
        return None
    return error
