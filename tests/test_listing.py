"""The gateway's tool listing: nodes that can tell their tools are read at once, the others
waited on together."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp_types import CallToolResult

from agent import ScriptedModel
from gateway import AgentSpec, Gateway
from tests.servers.inprocess import CrashableTransport, ToyServer
from toolkits import (
    CallContext,
    FunctionToolkit,
    Tool,
    calculator,
    error_result,
    function_tool,
)
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = pytest.mark.anyio


class Gated:
    """A node of a user's own (no `tools_at_hand`) that lists its tool only when let."""

    name = "gated"

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.let = anyio.Event()

    async def list_tools(self) -> Sequence[Tool]:
        self.asked.set()
        await self.let.wait()
        return (Tool("waited", "Listed once let.", {"type": "object"}, "gated", False),)

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, context: CallContext | None = None
    ) -> CallToolResult:
        return error_result("not called here")


def helper(description: str) -> AgentSpec:
    return AgentSpec(name="helper", model=ScriptedModel(["hi"]), description=description)


async def test_a_node_that_must_be_waited_on_is_listed_with_the_others() -> None:
    gated = Gated()
    gateway = Gateway([FunctionToolkit("calculator", [calculator]), gated])
    listed: dict[str, Tool] = {}

    async def list_all() -> None:
        listed.update(await gateway.list_tools())

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(list_all)
            await gated.asked.wait()
            assert not listed  # the listing waits for the node
            gated.let.set()
    assert list(listed) == ["calculator", "waited"]


async def test_a_server_still_connecting_is_waited_for_not_listed_empty() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    transport = CrashableTransport(toy.server)
    connecting, let = anyio.Event(), anyio.Event()

    @asynccontextmanager
    async def held() -> AsyncGenerator[Any]:  # the first connection waits to be let through
        connecting.set()
        await let.wait()
        async with transport.connect() as streams:
            yield streams

    node = McpToolkit("toy", McpServerConfig(command="in-process"), target=held)
    gateway = Gateway([FunctionToolkit("calculator", [calculator]), node])
    listed: dict[str, Tool] = {}
    done = anyio.Event()

    async def list_all() -> None:
        listed.update(await gateway.list_tools())
        done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(node.run)
            await connecting.wait()
            assert node.tools_at_hand() is None
            tg.start_soon(list_all)
            await anyio.wait_all_tasks_blocked()
            assert not done.is_set()  # waiting for the node, not listing it without tools
            let.set()
            await done.wait()
            assert node.tools_at_hand() == tuple(listed.values())[1:]
            tg.cancel_scope.cancel()
    assert list(listed) == ["calculator", "toy__echo"]


async def test_nodes_at_hand_are_listed_without_a_trip_through_the_event_loop() -> None:
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [helper("Helps.")])
    tools: dict[str, Tool] = {}
    with anyio.CancelScope() as scope:
        scope.cancel()  # any checkpoint (a task per node, say) would end the listing here
        tools = await gateway.tools_of(["calculator", "helper"], "a test")
    assert not scope.cancelled_caught
    assert [(t.name, t.source_node) for t in tools.values()] == [
        ("calculator", "calculator"),
        ("helper", "helper"),
    ]


async def test_an_agent_listed_as_a_tool_is_the_agent_it_is_now() -> None:
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [helper("Helps.")])
    first = await gateway.tools_of(["calculator", "helper"], "a test")
    assert await gateway.tools_of(["calculator", "helper"], "a test") is first  # kept
    gateway.agents["helper"] = helper("Helps better.")
    again = await gateway.tools_of(["calculator", "helper"], "a test")
    assert again["helper"].description == "Helps better."
    assert first["helper"].description == "Helps."


async def test_a_node_replaced_after_the_gateway_was_made_is_listed_as_it_is_now() -> None:
    @function_tool
    def shout(text: str) -> str:
        """Says it louder."""
        return text.upper()

    gateway = Gateway([FunctionToolkit("words", [calculator])])
    assert list(await gateway.list_tools()) == ["calculator"]
    gateway.nodes["words"] = FunctionToolkit("words", [shout])
    assert list(await gateway.list_tools()) == ["shout"]
