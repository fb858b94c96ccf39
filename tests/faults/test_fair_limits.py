"""One client can never hurt another: limits per node, and per client and node.

Clients are real in-process MCP connections to one served gateway in proxy mode; the slow
server is an MCP node whose `hang` calls wait until the test releases them.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway import Gateway
from tests.server.support import ERAS, serve
from tests.servers.inprocess import Context, ToyServer, text_result
from tests.servers.turnstile import Turnstile
from toolkits import FunctionToolkit, calculator, result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio


class SlowServer:
    """`slow__hang` calls wait for `release`; `running` counts the calls inside the server."""

    def __init__(self) -> None:
        self.running = 0
        self.release = anyio.Event()
        self._changed = anyio.Event()
        self.toy = ToyServer("slow")
        self.toy.add("hang", self._hang)

    async def _hang(self, _ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        self.running += 1
        self._changed.set()
        await self.release.wait()
        return text_result("released")

    async def until_running(self, count: int) -> None:
        while self.running < count:
            self._changed = anyio.Event()
            await self._changed.wait()


@asynccontextmanager
async def gateway_with(slow: SlowServer, **options: Any) -> AsyncGenerator[Gateway]:
    config = McpServerConfig(command="in-process", protocol="legacy")
    node = McpToolkit("slow", config, target=slow.toy.server)
    async with node:
        yield Gateway([node, FunctionToolkit("calculator", [calculator])], [], **options)


@asynccontextmanager
async def clients(gateway: Gateway, count: int, era: str = "auto") -> AsyncGenerator[list[Client]]:
    server = serve(gateway, expose_tools=True)
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(Client(server, mode=era)) for _ in range(count)]


async def hang(client: Client) -> None:
    await client.call_tool("slow__hang", {})


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_with_hung_calls_delays_no_other_client(era: str) -> None:
    slow = SlowServer()
    async with (
        gateway_with(slow, max_concurrency=4) as gateway,
        clients(gateway, 2, era) as (a, b),
    ):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(8):  # twice its share: four run, four wait in a's own queue
                    tg.start_soon(hang, a)
                await slow.until_running(4)
                # b's call to the same server and to a local tool go straight through.
                tg.start_soon(hang, b)
                await slow.until_running(5)
                sum_ = await b.call_tool("calculator", {"expression": "2 + 3"})
                assert result_text(sum_) == "5"
                assert slow.running == 5
                slow.release.set()
        assert slow.running == 9


async def test_a_local_tool_never_waits_behind_a_slow_server() -> None:
    slow = SlowServer()
    async with gateway_with(slow, max_concurrency=2) as gateway, clients(gateway, 1) as (a,):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(hang, a)
                await slow.until_running(2)
                product = await a.call_tool("calculator", {"expression": "6 * 7"})
                assert result_text(product) == "42"
                slow.release.set()


async def test_ten_parallel_calls_of_one_client_run_at_once_by_default() -> None:
    slow = SlowServer()
    async with gateway_with(slow) as gateway, clients(gateway, 1) as (a,):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for _ in range(10):
                    tg.start_soon(hang, a)
                await slow.until_running(10)
                slow.release.set()


async def test_a_server_takes_no_more_than_its_own_limit_from_all_clients() -> None:
    slow = SlowServer()
    async with (
        gateway_with(slow, node_limits={"slow": 3}) as gateway,
        clients(gateway, 3) as three,
    ):
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                for client in three:
                    tg.start_soon(hang, client)
                    tg.start_soon(hang, client)
                await slow.until_running(3)
                # The rest wait at the gateway, not at the server.
                for _ in range(5):
                    await anyio.lowlevel.checkpoint()
                assert slow.running == 3
                slow.release.set()
        assert slow.running == 6


async def waiting_clients(gateway: Gateway, node: str, count: int) -> None:
    """Until `count` clients have calls waiting for the node's slots."""
    while len(gateway.node_limit(node).waiting) < count:
        await anyio.lowlevel.checkpoint()


@pytest.mark.parametrize("era", ERAS)
async def test_a_full_server_gives_its_next_slot_to_a_client_that_waits_with_none_running(
    era: str,
) -> None:
    gate = Turnstile()
    config = McpServerConfig(command="in-process", protocol="legacy")
    async with gate, McpToolkit("gate", config, target=gate.toy.server) as node:
        gateway = Gateway([node], [], node_limits={"gate": 2})
        async with clients(gateway, 2, era) as (a, b):
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    for _ in range(6):  # within a's own quota: four wait for the server's slots
                        tg.start_soon(a.call_tool, "gate__pass", {"who": "a"})
                    await gate.until_started(2)
                    tg.start_soon(b.call_tool, "gate__pass", {"who": "b"})
                    await waiting_clients(gateway, "gate", 2)
                    gate.let_through(1)  # one of a's calls ends: b's first call is next
                    await gate.until_started(3)
                    assert gate.started == ["a", "a", "b"]
                    gate.let_through(6)
            assert gate.started.count("a") == 6
