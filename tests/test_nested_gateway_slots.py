"""Nested agents through two gateways on a server's `max_concurrency`: G1's `outer` calls G2's
`mid` (holding one of G1's `g2` slots), which calls G1's `inner`, which calls G2's `leaf`
through `g2` again. The call coming back takes the slot its caller lent it (`node_slots`), so
the chain ends with `max_concurrency = 1`, where it used to wait for itself for ever.

G1 runs in this process, served over real HTTP on 127.0.0.1; G2 is a real `serve --http`.
"""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from agent import ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from gateway.server import HttpOptions, http_app
from tests.server.processes import http_server
from tests.server.support import call as answer
from tests.server.support import serve
from tests.servers.asgi import serve_on_loopback
from tests.test_nested_gateways import call, script
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_an_agent_coming_back_through_another_gateway_takes_its_callers_slot(
    tmp_path: Path,
) -> None:
    g1_port, g2_port = free_port(), free_port()
    mid = script(tmp_path / "mid.json", call("g1__inner", prompt="ask inner"), "mid done")
    leaf = script(tmp_path / "leaf.json", "leaf done")
    (tmp_path / "g2.toml").write_text(
        f'[mcpServers.g1]\nurl = "http://127.0.0.1:{g1_port}/mcp"\n'
        f'[agents.mid]\nmodel = "scripted:{mid}"\ntools = ["g1"]\ndescription = "mid"\n'
        f'[agents.leaf]\nmodel = "scripted:{leaf}"\ntools = []\ndescription = "leaf"\n'
    )
    outer = ScriptedModel([answer("g2__mid", prompt="ask mid"), "outer done"])
    inner = ScriptedModel([answer("g2__leaf", prompt="ask leaf"), "inner done"])
    g2_config = McpServerConfig(url=f"http://127.0.0.1:{g2_port}/mcp", max_concurrency=1)
    node = McpToolkit("g2", g2_config)
    agents = [
        AgentSpec(name="outer", model=outer, tools=["g2"]),
        AgentSpec(name="inner", model=inner, tools=["g2"], description="inner agent on g1"),
    ]
    g1 = Gateway([node], agents, node_limits={"g2": 1})
    app = http_app(serve(g1), HttpOptions(host="127.0.0.1", port=g1_port))
    with anyio.fail_after(50):  # was: `inner` waited for `outer`'s slot of g2 for ever
        async with (
            serve_on_loopback(app, g1_port),  # G1 first: G2 waits for it as it starts
            http_server(tmp_path / "g2.toml", address=f"127.0.0.1:{g2_port}"),
            node,
        ):
            result = await g1.run("outer", "go")
    assert result.error is None
    assert result.output == "outer done"
    [mid_said] = [m.content for m in outer.calls[1][0] if isinstance(m, ToolMessage)]
    assert mid_said == "mid done"
    [leaf_said] = [m.content for m in inner.calls[1][0] if isinstance(m, ToolMessage)]
    assert leaf_said == "leaf done"
