"""Gateways in a loop list a bounded, stable set of tools.

Every served tool names in its `_meta` the gateways it came through; a gateway leaves out a
node's tool that came from itself (around a loop) or through as many gateways as its depth
limit, and warns of it once per node. Two gateways exposing each other's tools used to list
`peer__peer__...` tools without end.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway import Gateway
from gateway.assembly import open_gateway
from gateway.config import load_config
from gateway.loops import VIA_META_KEY
from tests.server.processes import REPO, SCRIPT, Served, http_server
from tests.server.proxying import Heard
from tests.server.support import serve
from tests.servers.databases import free_port
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import FunctionToolkit, McpServerConfig, McpToolkit, calculator

pytestmark = pytest.mark.anyio

LOOP_WARNING = "WARNING gateway.loops: node 'peer' offers this gateway's own tools back"


async def echo(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
    return text_result("echo")


def came_through(toy: ToyServer, name: str, *gateways: str) -> None:
    """`toy` lists `name` as a gateway would that served it through `gateways`."""
    tool = types.Tool(
        name=name, input_schema={"type": "object"}, _meta={VIA_META_KEY: list(gateways)}
    )
    toy.tools[name] = (tool, echo)


def loop_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gateway.loops"]


async def test_tools_from_this_gateway_or_too_deep_are_left_out_with_one_warning_each(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toy = ToyServer("peer")
    node = McpToolkit("peer", McpServerConfig(command="in-process"), target=toy.server)
    gateway = Gateway([FunctionToolkit("calculator", [calculator]), node], max_depth=3)
    us = gateway.gateway_id
    came_through(toy, "ours", us, "b1")  # our own tool, come back through gateway b1
    came_through(toy, "deep", "d1", "c1", "b1")  # a call would reach d1 with 3 hops: refused
    came_through(toy, "near", "c1", "b1")
    toy.add_echo("plain")  # no gateway's
    caplog.set_level(logging.WARNING, "gateway.loops")
    async with node:
        assert set(await gateway.list_tools()) == {"calculator", "peer__near", "peer__plain"}
        came_through(toy, "ours_too", "c1", us, "b1")
        came_through(toy, "deeper", "e1", "d1", "c1", "b1")
        await node.refresh_tools()  # a changed listing is filtered again, warned of no more
        assert set(await gateway.list_tools()) == {"calculator", "peer__near", "peer__plain"}
        async with Client(serve(gateway, expose_tools=True)) as client:
            served = {tool.name: tool.meta for tool in (await client.list_tools()).tools}
    loop, deep = loop_warnings(caplog)
    assert loop.startswith("node 'peer' offers this gateway's own tools back")
    assert f"(this gateway is {us}; the tools came {us} -> b1 -> here)" in loop
    assert loop.endswith("left out: peer__ours. Expose the other gateway's tools on one side "
                         "only (gateway.expose without node 'peer')")  # fmt: skip
    assert deep == (
        "node 'peer' offers tools that came through 3 gateways, as many as the depth limit "
        "(gateway.max_depth = 3), so a call of them would be refused; left out: peer__deep"
    )
    # What it serves names it last among the gateways each tool came through.
    assert served == {
        "calculator": {VIA_META_KEY: [us]},
        "peer__near": {VIA_META_KEY: ["c1", "b1", us]},
        "peer__plain": {VIA_META_KEY: [us]},
    }


def exposing(path: Path, calculator_name: str, peer: str) -> Path:
    """A gateway config exposing its calculator and its peer's tools (`peer`: the
    `[mcpServers.peer]` body)."""
    path.write_text(
        "[gateway]\nmax_depth = 3\nexpose_tools = true\n"
        f'[tools.{calculator_name}]\nbuiltin = "calculator"\n'
        f"[mcpServers.peer]\n{peer}"
    )
    return path


async def settled(client: Client, heard: Heard, expected: set[str]) -> None:
    """List until the tools are `expected`, listing again at each list change heard."""
    while True:
        count = len(heard.lists)
        if {tool.name for tool in (await client.list_tools()).tools} == expected:
            return
        await heard.more_than(count, "tools")


async def line_containing(served: Served, text: str) -> None:
    while not any(text in line for line in served.stderr):
        more = served.more_stderr
        assert not served.stderr_closed.is_set(), served.stderr
        await more.wait()


@pytest.mark.integration
async def test_two_gateways_exposing_each_other_over_http_settle(tmp_path: Path) -> None:
    port = free_port()
    peer_of_e2 = f'url = "http://127.0.0.1:{port}/mcp"\n'
    heard_1, heard_2 = Heard(), Heard()
    async with http_server(exposing(tmp_path / "e2.toml", "calc2", peer_of_e2)) as e2:
        peer_of_e1 = f"url = {json.dumps(e2.url)}\n"
        e1_config = exposing(tmp_path / "e1.toml", "calc1", peer_of_e1)
        async with (
            http_server(e1_config, address=f"127.0.0.1:{port}") as e1,
            Client(f"http://127.0.0.1:{port}/mcp", mode="legacy", message_handler=heard_1.on_message) as c1,
            Client(e2.url, mode="legacy", message_handler=heard_2.on_message) as c2,
        ):  # fmt: skip
            with anyio.fail_after(40):
                # Each sees its own calculator come back through the other, and leaves it out.
                await line_containing(e1, LOOP_WARNING)
                await line_containing(e2, LOOP_WARNING)
                await settled(c1, heard_1, {"calc1", "peer__calc2"})
                await settled(c2, heard_2, {"calc2", "peer__calc1"})
                # A call through the other gateway still works.
                result = await c1.call_tool("peer__calc2", {"expression": "6 * 7"})
            # And the lists stay so (a bounded wait for what must not happen: they grew by
            # about one tool a second before).
            with anyio.move_on_after(1.5):
                await heard_1.more_than(len(heard_1.lists) + 5)
            later_1 = {tool.name for tool in (await c1.list_tools()).tools}
            later_2 = {tool.name for tool in (await c2.list_tools()).tools}
    assert result.is_error is False
    assert result.content == [types.TextContent(text="42")]
    assert later_1 == {"calc1", "peer__calc2"}
    assert later_2 == {"calc2", "peer__calc1"}
    for gateway in (e1, e2):
        assert len([line for line in gateway.stderr if "gateway.loops" in line]) == 1


@pytest.mark.integration
async def test_a_gateway_exposes_another_gateways_tools_over_http(tmp_path: Path) -> None:
    b_config = tmp_path / "b.toml"
    b_config.write_text('[gateway]\nexpose_tools = true\n[tools.calc]\nbuiltin = "calculator"\n')
    async with http_server(b_config) as b:
        a_config = tmp_path / "a.toml"
        a_config.write_text(f"[gateway]\nexpose_tools = true\n[mcpServers.b]\nurl = {json.dumps(b.url)}\n")  # fmt: skip
        async with http_server(a_config) as a, Client(a.url, mode="legacy") as client:
            with anyio.fail_after(20):
                [tool] = (await client.list_tools()).tools
                result = await client.call_tool("b__calc", {"expression": "2 + 3"})
    assert tool.name == "b__calc"
    assert tool.meta is not None
    b_id, a_id = tool.meta[VIA_META_KEY]
    assert b_id != a_id
    assert result.content == [types.TextContent(text="5")]
    assert not [line for line in a.stderr + b.stderr if "gateway.loops" in line]


def serve_stdio(config: Path) -> str:
    """A `[mcpServers.NAME]` body starting `agent-gateway serve --stdio` on `config`, on this
    checkout's code (a stdio server gets only a few of our environment variables)."""
    args = json.dumps(["serve", "--stdio", "--config", str(config)])
    return (
        f"command = {json.dumps(str(SCRIPT))}\nargs = {args}\ncwd = {json.dumps(str(REPO))}\n"
        f"env = {{PYTHONPATH = {json.dumps(str(REPO))}}}\n"
    )


async def tools_become(
    gateway: Gateway, node: McpToolkit, done: Callable[[Mapping[str, object]], bool]
) -> None:
    """Wait until `done(gateway's tools)`, listing again whenever `node`'s tools change."""
    changed = anyio.Event()

    async def note(_node: str) -> None:
        nonlocal changed
        changed.set()
        changed = anyio.Event()

    unsubscribe = node.subscribe(note)
    try:
        while not done(await gateway.list_tools()):
            await changed.wait()
    finally:
        unsubscribe()


@pytest.mark.integration
async def test_gateways_starting_each_other_over_stdio_list_a_bounded_set(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A starts B, which starts A again (another process, so another id), which starts B; the
    # last starts nothing (the depth limit, 3). The listing at the top stops at the tools that
    # came through 2 gateways.
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    exposing(a, "calc_a", serve_stdio(b))
    exposing(b, "calc_b", serve_stdio(a))
    expected = {"calc_a", "peer__calc_b", "peer__peer__calc_a"}
    caplog.set_level(logging.WARNING, "gateway.loops")
    with anyio.fail_after(45):
        async with open_gateway(load_config(a)) as gateway:
            peer = gateway.nodes["peer"]
            assert isinstance(peer, McpToolkit)
            await tools_become(gateway, peer, lambda tools: "peer__peer__calc_a" in tools)
            assert set(await gateway.list_tools()) == expected
    [warning] = loop_warnings(caplog)
    assert warning.startswith("node 'peer' offers tools that came through 3 gateways")
    assert warning.endswith("left out: peer__peer__peer__calc_b")
