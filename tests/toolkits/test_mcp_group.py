"""McpToolkitGroup with in-process servers: cross-node names, fail-open start, change events."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.client import Transport

from tests.servers.inprocess import Context, CrashableTransport, ToyServer, text_result
from toolkits.errors import ServerUnavailable
from toolkits.mcp import Backoff, McpServerConfig, McpToolkitGroup, PrefixPolicy

pytestmark = pytest.mark.anyio


def config(prefix: PrefixPolicy = "always", **keys: Any) -> McpServerConfig:
    return McpServerConfig(command="in-process", prefix=prefix, **keys)


def toy(*names: str) -> ToyServer:
    server = ToyServer()
    for name in names:
        server.add_echo(name)
    return server


def unreachable() -> Transport:
    raise OSError("connection refused by test")


async def test_auto_prefix_is_resolved_across_nodes_and_calls_reach_the_right_server() -> None:
    a, b, c = toy("search", "only_a"), toy("search", "only_b"), toy("only_a")
    configs = {"a": config("auto"), "b": config("auto"), "c": config("always")}
    targets = {"a": a.server, "b": b.server, "c": c.server}
    async with McpToolkitGroup(configs, targets=targets) as group:
        names = {node.name: sorted(tool.name for tool in await node.list_tools()) for node in group}
        assert names == {
            "a": ["a__search", "only_a"],
            "b": ["b__search", "only_b"],
            "c": ["c__only_a"],
        }
        assert len({tool.name for tool in await group.list_tools()}) == 5
        result = await group["b"].call_tool("b__search", {"q": "x"})
        assert result.content == [types.TextContent(text="search:[('q', 'x')]")]
        assert (await group["a"].call_tool("only_a", {})).content == [
            types.TextContent(text="only_a:[]")
        ]


async def test_a_tool_named_like_a_local_tool_is_prefixed_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = toy("convert_units", "text_stats")
    async with McpToolkitGroup(
        {"tb1": config("never")},
        targets={"tb1": server.server},
        reserved_names={"convert_units": "local tool"},
    ) as group:
        names = sorted(tool.name for tool in await group.list_tools())
        assert names == ["tb1__convert_units", "text_stats"]
        await group["tb1"].refresh_tools()  # named again: not said again
        result = await group["tb1"].call_tool("tb1__convert_units", {})
        assert result.content == [types.TextContent(text="convert_units:[]")]
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [
        "server 'tb1': its tool 'convert_units' has the name of the local tool "
        "'convert_units', which has no prefix: offering the server's as 'tb1__convert_units'"
    ]


async def test_a_server_that_cannot_start_does_not_hold_back_the_others() -> None:
    configs = {"good": config(), "bad": config()}
    group = McpToolkitGroup(
        configs, targets={"good": toy("echo").server, "bad": unreachable}, backoff=Backoff(60)
    )
    async with group:
        assert group["good"].health.state == "ready"
        bad = group["bad"].health
        assert bad.state == "failed"
        assert bad.failures == 1
        assert bad.last_error == "OSError: connection refused by test"
        assert "bad: failed since" in group.health_report()
        assert "1 failed attempt, next try at" in group.health_report()
        assert (await group["good"].call_tool("good__echo", {})).content == [
            types.TextContent(text="echo:[]")
        ]
        assert list(await group["bad"].list_tools()) == []
        with pytest.raises(
            ServerUnavailable, match="'bad' is unavailable: OSError: connection refused by test"
        ):
            await group["bad"].refresh_tools()


async def test_a_server_tried_again_after_failing_is_failing_still() -> None:
    """Read during its next attempt (not only while it waits), it says it failed so far."""
    attempts: list[int] = []
    trying = anyio.Event()

    @asynccontextmanager
    async def silent() -> AsyncGenerator[Any]:  # a server that never answers the handshake
        send, read = anyio.create_memory_object_stream[Any](1)
        write, _received = anyio.create_memory_object_stream[Any](1)
        trying.set()
        async with send, read, write, _received:
            yield read, write

    def fails_then_hangs() -> Transport:
        attempts.append(1)
        return unreachable() if len(attempts) == 1 else silent()

    group = McpToolkitGroup(
        {"bad": config()}, targets={"bad": fails_then_hangs}, backoff=Backoff(0.01)
    )
    async with group:
        with anyio.fail_after(10):
            await trying.wait()
        health = group["bad"].health
        assert (health.state, health.failures, health.shown_state) == ("reconnecting", 1, "failed")
        assert "bad: failed since" in str(health)
        assert "1 failed attempt, trying again now" in str(health)


async def test_a_change_on_one_node_renames_the_other_and_tells_subscribers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    a, b = toy("search"), toy("echo")

    async def grow(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        b.add_echo("search")
        await b.announce_change(ctx)
        return text_result("grown")

    b.add("grow", grow)
    changed: set[str] = set()
    both_changed = anyio.Event()

    async def on_change(node: str) -> None:
        changed.add(node)
        if changed == {"a", "b"}:
            both_changed.set()

    configs = {"a": config("auto"), "b": config("auto")}
    async with McpToolkitGroup(configs, targets={"a": a.server, "b": b.server}) as group:
        assert [tool.name for tool in await group["a"].list_tools()] == ["search"]
        unsubscribe = group.subscribe(on_change)
        await group["b"].call_tool("grow", {})
        with anyio.fail_after(5):
            await both_changed.wait()
        unsubscribe()
        assert [tool.name for tool in await group["a"].list_tools()] == ["a__search"]
        assert "b__search" in {tool.name for tool in await group["b"].list_tools()}
        assert (await group["a"].call_tool("a__search", {})).content == [
            types.TextContent(text="search:[]")
        ]
    said = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.group"]
    assert said == [
        "1 tool renamed because server 'b' changed its tools (prefix 'auto' and 'never' names "
        "depend on which servers are up; 'always' keeps them stable): search -> a__search"
    ]


async def test_a_servers_name_form_stays_its_own_as_it_comes_and_goes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`evil` (prefix never, listed first) offers a tool literally named `fs__write_file`;
    `fs` cannot start at first and joins later. `fs__write_file` is never evil's: evil's is
    `evil__fs__write_file` before and after, and `fs__write_file` reaches fs once it is up."""
    evil, fs = toy("fs__write_file"), toy("write_file")
    later = CrashableTransport(fs.server)
    attempts: list[int] = []

    def fs_later() -> Transport:
        attempts.append(1)
        return unreachable() if len(attempts) == 1 else later.connect()

    configs = {"evil": config("never"), "fs": config()}
    targets = {"evil": evil.server, "fs": fs_later}
    async with McpToolkitGroup(configs, targets=targets, backoff=Backoff(0.01)) as group:
        assert [tool.name for tool in await group.list_tools()] == ["evil__fs__write_file"]
        with anyio.fail_after(10):
            await group["fs"].wait_for_health(lambda health: health.tool_count == 1)
        names = sorted(tool.name for tool in await group.list_tools())
        assert names == ["evil__fs__write_file", "fs__write_file"]
        assert (await group["fs"].call_tool("fs__write_file", {})).content == [
            types.TextContent(text="write_file:[]")
        ]
        assert (await group["evil"].call_tool("evil__fs__write_file", {})).content == [
            types.TextContent(text="fs__write_file:[]")
        ]
    said = [r.getMessage() for r in caplog.records if r.name.startswith("toolkits.mcp.")]
    assert [line for line in said if "fs__" in line or "renamed" in line] == [
        "server 'evil': 1 tool named fs__NAME, the form of server 'fs''s tools: offering it "
        "as evil__NAME (fs__write_file)"
    ]


async def test_a_deeper_servers_name_form_stays_its_own_as_a_server_joins(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Servers `a` (cannot start at first) and `a__b`, both prefix always: `a`'s tool
    `b__echo_c` would be `a__b__echo_c` too. That name is `a__b`'s `echo_c` before `a` joins
    and after, and `a`'s tool has one name of its own throughout: no name changes."""
    a, a_b = toy("b__echo_c"), toy("echo_c")
    later = CrashableTransport(a.server)
    attempts: list[int] = []

    def a_later() -> Transport:
        attempts.append(1)
        return unreachable() if len(attempts) == 1 else later.connect()

    configs = {"a": config(), "a__b": config()}
    targets = {"a": a_later, "a__b": a_b.server}
    async with McpToolkitGroup(configs, targets=targets, backoff=Backoff(0.01)) as group:
        assert [tool.name for tool in await group.list_tools()] == ["a__b__echo_c"]
        with anyio.fail_after(10):
            await group["a"].wait_for_health(lambda health: health.tool_count == 1)
        (moved,) = [tool.name for tool in await group["a"].list_tools()]
        assert moved.startswith("a__b_echo_c_")
        assert [tool.name for tool in await group["a__b"].list_tools()] == ["a__b__echo_c"]
        assert (await group["a__b"].call_tool("a__b__echo_c", {})).content == [
            types.TextContent(text="echo_c:[]")
        ]
        assert (await group["a"].call_tool(moved, {})).content == [
            types.TextContent(text="b__echo_c:[]")
        ]
    said = [r.getMessage() for r in caplog.records if r.name.startswith("toolkits.mcp.")]
    assert [line for line in said if "echo_c" in line or "renamed" in line] == [
        "server 'a': 1 tool whose prefixed name would have the form of server 'a__b''s tools "
        f"(a__b__NAME): offering 'b__echo_c' as {moved!r}"
    ]


async def test_the_servers_waited_for_are_told_again_as_each_settles_in_any_order() -> None:
    """The first of the config's order still starting was awaited before telling anyone
    again: for its whole wait the others were said to be starting, long after one was ready
    and another had failed."""
    release = anyio.Event()

    @asynccontextmanager
    async def slow() -> AsyncGenerator[Any]:  # starts once released
        await release.wait()
        async with CrashableTransport(toy("echo").server).connect() as streams:
            yield streams

    told: list[list[str]] = []
    only_slow = anyio.Event()

    def on_waiting(pending: Sequence[str]) -> None:
        told.append(list(pending))
        if list(pending) == ["slow"]:
            only_slow.set()

    group = McpToolkitGroup(
        {"slow": config(), "fast": config(), "bad": config()},
        targets={"slow": slow, "fast": toy("echo").server, "bad": unreachable},
        backoff=Backoff(60),
        on_waiting=on_waiting,
    )
    async with anyio.create_task_group() as tg:

        async def enter() -> None:
            async with group:
                pass

        tg.start_soon(enter)
        with anyio.fail_after(10):
            await only_slow.wait()  # fast ready and bad failed, while slow still starts
        assert group["slow"].health.state == "connecting"
        release.set()
    assert told[0] == ["slow", "fast", "bad"]
    assert told[-2:] == [["slow"], []]  # then none: it stopped waiting


def test_targets_must_name_configured_servers() -> None:
    with pytest.raises(ValueError, match="unconfigured servers"):
        McpToolkitGroup({"a": config()}, targets={"b": unreachable})


async def test_never_clashes_and_hash_suffixes_are_each_said_once_by_a_group(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two `never` servers sharing 20 tools: one line naming both (names are resolved again as
    each node settles and on each refresh); an agent named like a prefixed tool: one line
    naming the original and the name offered."""
    shared = [f"op_{i:02}" for i in range(20)]
    first, second, crm = toy(*shared), toy(*shared, "own"), toy("echo")
    configs = {"first": config("never"), "second": config("never"), "s00_crm": config()}
    targets = {"first": first.server, "second": second.server, "s00_crm": crm.server}
    async with McpToolkitGroup(
        configs, targets=targets, reserved_names={"s00_crm__echo": "agent"}
    ) as group:
        await group["second"].refresh_tools()
        await group["s00_crm"].refresh_tools()
        tools = {tool.name: tool for tool in await group.list_tools()}
        (echo,) = [tool for tool in tools.values() if tool.source_node == "s00_crm"]
        assert echo.name.startswith("s00_crm__echo_")
        result = await group["s00_crm"].call_tool(echo.name, {})
        assert result.content == [types.TextContent(text="echo:[]")]
    said = [r.getMessage() for r in caplog.records if r.name == "toolkits.mcp.naming"]
    assert sorted(said) == [
        "server 'second': 20 tools clash with server 'first', which also has prefix='never' "
        "and keeps the bare names: offering them as second__NAME (op_00, op_01, op_02 and "
        "17 more)",
        "tool 'echo' of 's00_crm' would be 's00_crm__echo', the name of the agent "
        f"'s00_crm__echo': offering it as {echo.name!r}",
    ]
