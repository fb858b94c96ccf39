"""A client's `_meta` on a proxied tool call reaches the downstream server: its own keys (a
vendor's, a W3C trace context) as sent, passed through or not, over HTTP and stdio fronts, in
both client eras and both node eras; the hop count one more, and nothing of the client's
2026-07-28 envelope (the node's request states its own)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from gateway.run_context import HOPS_META_KEY
from tests.servers.asgi import serve_on_loopback
from toolkits import result_text
from toolkits.mcp.config import ProtocolMode

from .test_proxy_errors import Era, Front, front_client

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SENT = {
    "com.example/custom": {"a": 1},
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
    "tracestate": "k=v",
}


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool()
    def whatmeta(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """The request's `_meta`, as this server got it."""
        return json.dumps(ctx.request_context.meta or {})

    return server


async def _unheard(progress: float, total: float | None, message: str | None) -> None:
    del progress, total, message


@pytest.mark.parametrize("protocol", ["auto", "modern"])
@pytest.mark.parametrize("front", ["http", "stdio"])
async def test_the_clients_meta_reaches_the_downstream(
    protocol: ProtocolMode, front: Front
) -> None:
    seen: dict[tuple[Era, bool, bool, bool], dict[str, Any]] = {}
    url = ""

    async def calls(era: Era, asks: bool, passing: bool) -> None:
        async with front_client(
            url, front, era, pass_through=passing, protocol=protocol, asks=asks
        ) as (client, forwarded):
            await client.list_tools()
            for progress in (False, True):
                result = await client.call_tool(
                    "d__whatmeta",
                    {},
                    meta=SENT,  # pyright: ignore[reportArgumentType]
                    progress_callback=_unheard if progress else None,
                )
                seen[era, asks, passing, progress] = json.loads(result_text(result))
            assert forwarded() == (2 if passing else 0)

    with anyio.fail_after(90):
        async with serve_on_loopback(downstream().streamable_http_app(host="127.0.0.1")) as base:
            url = f"{base}/mcp"
            for era in ("legacy", "auto"):
                for asks in (False, True):  # a client that can be asked: parked, in rounds
                    for passing in (True, False):
                        await calls(era, asks, passing)
    for where, meta in seen.items():
        assert {key: meta.get(key) for key in SENT} == SENT, where
        assert meta[HOPS_META_KEY] == 1, where
        # Ours, whether or not the client asked: the server's progress keeps the clock alive.
        assert {"progressToken", "progress_token"} & meta.keys(), where  # as the SDK reads it
        if protocol == "auto":  # a handshake-era request: no envelope, the client's least of all
            assert not [key for key in meta if key.startswith("io.modelcontextprotocol/")]
        else:  # the node's own envelope, not the client's
            info = meta["io.modelcontextprotocol/clientInfo"]
            assert info["name"] != "mcp", where
