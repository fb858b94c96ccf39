"""A call waiting for a slot of a full server says so while it waits, and gives up after the
server's `timeout` with an error naming the limit, never waiting for ever.

The slot is held by the test itself (a client's share of the node, as any call takes it); the
waiting call is an agent's, served to a real in-process MCP client that follows its progress.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from agent import ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from tests.server.support import ProgressLog, call, serve
from tests.servers.inprocess import ToyServer
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

WAITS = "waiting for a free slot of 'slow' (max_concurrency 1)"


async def test_a_call_waiting_for_a_full_servers_slot_says_so_and_gives_up_after_its_timeout() -> (
    None
):
    toy = ToyServer("slow")
    toy.add_echo("echo")
    config = McpServerConfig(
        command="in-process", protocol="legacy", timeout=0.5, connect_timeout=30
    )
    model = ScriptedModel([call("slow__echo", text="hi"), "the server was full"])
    agent = AgentSpec(name="worker", model=model, tools=["slow"], description="Works.")
    progress = ProgressLog()
    async with McpToolkit("slow", config, target=toy.server) as node:
        gateway = Gateway([node], [agent], node_limits={"slow": 1})
        async with Client(serve(gateway)) as client:
            with anyio.fail_after(20):
                async with gateway.client_quota().limiter("slow"):  # another's call holds it
                    result = await client.call_tool(
                        "worker", {"prompt": "go"}, progress_callback=progress
                    )
    assert result_text(result) == "the server was full"
    [observed] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed.startswith(
        "Error: waited 0.5 s for a free slot of 'slow' (max_concurrency 1), "
    )
    assert "the call was not made" in observed
    messages = [message or "" for _, _, message in progress.updates]
    assert f"tool slow__echo: {WAITS}" in messages  # said at once, not at the next heartbeat
