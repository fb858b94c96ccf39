"""What relaying the exposed MCP nodes' answers takes, whatever the feature.

- `without_stamp`: the downstream server's own `serverInfo` stamp (2026-07-28 servers put it
  in `_meta`) is not ours to relay; the SDK adds ours.
- `hop_meta`: the `_meta` that carries the hop count one gateway further.
- `as_mcp_error`: a node's failure as the MCP error our client receives.
"""

from __future__ import annotations

from typing import Any, TypeVar

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp_types import SERVER_INFO_META_KEY
from pydantic import BaseModel

from toolkits import ToolkitError

from ...run_context import HOPS_META_KEY

__all__ = ["as_mcp_error", "hop_meta", "incoming_hops", "without_stamp"]

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
    return {HOPS_META_KEY: incoming_hops(ctx) + 1}


def as_mcp_error(node: str, exc: ToolkitError) -> MCPError:
    return MCPError(types.INTERNAL_ERROR, f"node {node!r} failed: {exc}")
