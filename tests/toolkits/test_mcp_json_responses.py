"""A server answering POSTs with plain JSON (`json_response`, as stateless servers do) over real
HTTP on 127.0.0.1: each call's response body is read whole, and closing it waits for nothing."""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest

from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode, transport

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_calls_to_a_json_answering_server_are_not_held_by_the_close_of_their_response(
    era: ProtocolMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Closing a response waits up to this long for the rest of its body (an event stream's
    # end); a JSON body read whole has no rest. It cost each call 0.5 s.
    monkeypatch.setattr(transport, "_DRAIN_SECONDS", 30.0)
    toy = ToyServer("json")
    toy.add_echo("echo")
    app = toy.server.streamable_http_app(host="127.0.0.1", json_response=True)
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        with anyio.fail_after(10):
            async with McpToolkit("json", config) as node:
                assert node.health.state == "ready", node.health
                for n in range(3):
                    result = await node.call_tool("json__echo", {"n": n})
                    block = result.content[0]
                    assert isinstance(block, types.TextContent)
                    assert block.text == f"echo:[('n', {n})]"
