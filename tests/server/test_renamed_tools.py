"""Tools renamed while the gateway runs (`prefix="auto"`): a server that joins late makes a
clashing server's bare names prefixed. The rename is warned of once, and a call under the
old name, served or made by a model, is answered with the new one."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client import Transport

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from tests.servers.inprocess import CrashableTransport, ToyServer
from toolkits.mcp import McpServerConfig, McpToolkitGroup

from .support import serve

pytestmark = pytest.mark.anyio


def toy(*names: str) -> ToyServer:
    server = ToyServer()
    for name in names:
        server.add_echo(name)
    return server


@asynccontextmanager
async def crm_and_late_legacy() -> AsyncGenerator[McpToolkitGroup]:
    """`crm` and `legacy_crm`, both `prefix="auto"` with the same tools; the gateway waits
    for `crm` only, and `legacy_crm` lists its tools once the block lets it (a slow server)."""
    crm, legacy = toy("search", "echo"), toy("search", "echo")
    gate = anyio.Event()
    late = CrashableTransport(legacy.server)

    @asynccontextmanager
    async def slow() -> AsyncGenerator[Any]:
        await gate.wait()
        async with late.connect() as streams:
            yield streams

    def legacy_target() -> Transport:
        return slow()

    configs = {
        name: McpServerConfig(command="in-process", prefix="auto") for name in ("crm", "legacy_crm")
    }
    targets = {"crm": crm.server, "legacy_crm": legacy_target}
    async with McpToolkitGroup(configs, targets=targets, wait_for=["crm"]) as group:
        assert [tool.name for tool in await group.list_tools()] == ["search", "echo"]
        renamed = anyio.Event()

        async def on_change(_node: str) -> None:
            if any(tool.name == "crm__search" for tool in await group["crm"].list_tools()):
                renamed.set()

        unsubscribe = group.subscribe(on_change)
        gate.set()
        with anyio.fail_after(10):
            await renamed.wait()
        unsubscribe()
        yield group


async def test_a_late_server_renames_the_others_tools_and_one_warning_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with crm_and_late_legacy() as group:
        names = sorted(tool.name for tool in await group.list_tools())
        assert names == ["crm__echo", "crm__search", "legacy_crm__echo", "legacy_crm__search"]
        assert group["crm"].now_named("search") == "crm__search"
        assert group["crm"].now_named("crm__search") is None  # offered under that name now
        assert group["legacy_crm"].now_named("search") is None  # never its name
    said = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.group"]
    assert said == [
        "2 tools renamed because server 'legacy_crm' now lists its tools (prefix 'auto' and "
        "'never' names depend on which servers are up; 'always' keeps them stable): "
        "search -> crm__search, echo -> crm__echo"
    ]


async def test_no_rename_is_warned_of_while_the_gateway_starts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Names nobody has seen yet are not renamed for anyone: both servers awaited."""
    caplog.set_level(logging.WARNING)
    configs = {n: McpServerConfig(command="in-process", prefix="auto") for n in ("a", "b")}
    targets = {"a": toy("search").server, "b": toy("search").server}
    async with McpToolkitGroup(configs, targets=targets) as group:
        assert sorted(t.name for t in await group.list_tools()) == ["a__search", "b__search"]
    assert not [r for r in caplog.records if r.name == "toolkits.mcp.group"]


async def test_a_served_call_of_the_old_name_is_told_the_new_one() -> None:
    async with (
        crm_and_late_legacy() as group,
        Client(serve(Gateway(group.nodes, []), expose_tools=True)) as client,
    ):
        result = await client.call_tool("search", {"q": "x"})
        assert result.is_error
        assert result.content == [
            types.TextContent(
                text="there is no tool named 'search' now: did you mean 'crm__search'? (it was "
                "renamed when another server came or went)"
            )
        ]
        result = await client.call_tool("crm__search", {"q": "x"})
        assert result.content == [types.TextContent(text="search:[('q', 'x')]")]


async def test_a_models_call_of_the_old_name_is_told_the_new_one() -> None:
    model = ScriptedModel(
        [
            ScriptedAnswer(tool_calls=[ScriptedCall(name="search", id="s1", arguments={})]),
            "done",
        ]
    )
    async with crm_and_late_legacy() as group:
        gateway = Gateway(group.nodes, [AgentSpec("a", model, tools=["crm", "legacy_crm"])])
        assert (await gateway.run("a", "find it")).output == "done"
    [said] = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert said.startswith(
        "Error: there is no tool named 'search' now: did you mean 'crm__search'?"
    )


async def test_a_call_by_the_servers_own_name_reaches_the_tool_that_alone_has_it() -> None:
    """Names a model refuses (`a.b`, `a/b`, over 64 characters) are served under names it
    takes; a client that knew the server directly calls them by the server's names."""
    long = "x" * 100
    configs = {
        "raw": McpServerConfig(command="in-process", prefix="never"),
        "one": McpServerConfig(command="in-process"),
        "two": McpServerConfig(command="in-process"),
    }
    targets = {
        "raw": toy("a.b", "a/b", long).server,
        "one": toy("c.d").server,
        "two": toy("c.d").server,
    }
    async with (
        McpToolkitGroup(configs, targets=targets) as group,
        Client(serve(Gateway(group.nodes, []), expose_tools=True)) as client,
    ):
        listed = sorted(tool.name for tool in (await client.list_tools()).tools)
        assert listed[:2] == ["a_b", "a_b_c14cddc0"]
        assert listed[2:4] == ["one__c_d", "two__c_d"]
        for own in ("a.b", "a/b", long):
            result = await client.call_tool(own, {"q": 1})
            assert result.content == [types.TextContent(text=f"{own}:[('q', 1)]")]
        result = await client.call_tool("c.d", {})  # two servers' tool: which is meant?
        [said] = result.content
        assert result.is_error
        assert isinstance(said, types.TextContent)
        assert said.text.startswith("no tool named 'c.d'")
