"""A result a server middleware answers with itself, shaped as the SDK shapes a handler's.

The SDK shapes a handler's result for the session's protocol version (`resultType` only at
2026-07-28, and there the server's `serverInfo` stamp in `_meta`), but a middleware that
answers without calling on owns its result as it is: this gives it the same shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["tool_result_for"]


def tool_result_for(
    result: types.CallToolResult,
    version: str,
    stamp: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """`result` of a `tools/call` as a `version` client gets every other one; `stamp` gives
    the server's `serverInfo` (`Server.server_info_stamp`) for a 2026-07-28 client (None:
    only handshake-era clients get this result)."""
    dumped = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    wire = serialize_server_result("tools/call", version, dumped)
    if version in MODERN_PROTOCOL_VERSIONS and stamp is not None:
        wire["_meta"] = {**wire.get("_meta", {}), SERVER_INFO_META_KEY: stamp()}
    return wire
