"""A call waiting for a slot of a full server says so while it waits, and gives up after the
server's `timeout` with an error naming the limit, never waiting for ever.

The slot is held by the test itself (a client's share of the node, as any call takes it); the
waiting call is an agent's, served to a real in-process MCP client that follows its progress,
or a proxied call's, served over HTTP on both paths.
"""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from agent import ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served.pass_through import PassThrough
from tests.server.proxying import ClientAnswers
from tests.server.support import ProgressLog, call, serve
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio

WAITS = "waiting for a free slot of 'slow' (max_concurrency 1)"


@pytest.mark.parametrize("limited_by", ["server", "gateway"])
async def test_a_call_waiting_for_a_full_servers_slot_says_so_and_gives_up_after_its_timeout(
    limited_by: str,
) -> None:
    """The limit is the server's own `max_concurrency` (which a `Gateway` built in code once
    ignored: only `open_gateway` read it), or the `Gateway`'s `node_limits`, over it."""
    toy = ToyServer("slow")
    toy.add_echo("echo")
    config = McpServerConfig(
        command="in-process",
        protocol="legacy",
        timeout=0.5,
        connect_timeout=30,
        max_concurrency=1 if limited_by == "server" else 5,
    )
    model = ScriptedModel([call("slow__echo", text="hi"), "the server was full"])
    agent = AgentSpec(name="worker", model=model, tools=["slow"], description="Works.")
    progress = ProgressLog()
    async with McpToolkit("slow", config, target=toy.server) as node:
        limits = {"slow": 1} if limited_by == "gateway" else None
        gateway = Gateway([node], [agent], node_limits=limits)
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


@pytest.mark.integration
@pytest.mark.parametrize("era", ["auto", "legacy"])
@pytest.mark.parametrize("asks", [False, True], ids=["unasked", "askable"])
@pytest.mark.parametrize("pass_through", [True, False], ids=["passed", "usual"])
async def test_a_proxied_call_waiting_for_a_full_servers_slot_says_so_in_its_progress(
    era: str, asks: bool, pass_through: bool
) -> None:
    """Both paths of a proxied call (passed straight through, in input-required rounds for a
    2026-07-28 client that can be asked, or the SDK's), over real HTTP on 127.0.0.1: its
    client hears why it waits, as an agent's does, then gets its answer."""
    down = MCPServer("down")

    @down.tool()
    def echo(text: str) -> str:
        """Say `text` back."""
        return text

    heard_log = ProgressLog()
    waiting = anyio.Event()

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        await heard_log(progress, total, message)
        waiting.set()

    with anyio.fail_after(30):
        async with serve_on_loopback(down.streamable_http_app(host="127.0.0.1")) as down_base:
            config = McpServerConfig(url=f"{down_base}/mcp", timeout=20)
            async with McpToolkit("d", config) as node:
                node.raw_calls = pass_through
                gateway = Gateway([node], [], node_limits={"d": 1})
                app = http_app(
                    serve(gateway, expose_tools=True, pass_through=pass_through),
                    HttpOptions("127.0.0.1", 0),
                )
                async with (
                    serve_on_loopback(app) as base,
                    Client(
                        f"{base}/mcp", mode=era, **(ClientAnswers().callbacks() if asks else {})
                    ) as c,
                ):
                    await c.list_tools()  # a call before any listing takes the usual path
                    results: list[types.CallToolResult] = []

                    async def call() -> None:
                        arguments = {"text": "hi"}
                        results.append(
                            await c.call_tool("d__echo", arguments, progress_callback=heard)
                        )

                    async with (
                        anyio.create_task_group() as tg,
                        gateway.client_quota().limiter("d"),  # another call holds the slot
                    ):
                        tg.start_soon(call)
                        await waiting.wait()
                layers = [layer for layer in app.state.layers if isinstance(layer, PassThrough)]
    assert [result_text(result) for result in results] == ["hi"]
    assert heard_log.messages == ["waiting for a free slot of 'd' (max_concurrency 1)"]
    assert [layer.forwarded for layer in layers] == ([1] if pass_through else [])
