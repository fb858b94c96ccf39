"""McpToolkit against real SDK servers in-process (both protocol eras where it matters)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.servers.inprocess import (
    Context,
    CrashableTransport,
    ToyServer,
    content_kinds_result,
    text_result,
)
from toolkits.base import CallContext, Toolkit
from toolkits.errors import ConnectionLost, NoSuchTool, ServerUnavailable, ToolTimeout
from toolkits.health import NodeHealth
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

pytestmark = pytest.mark.anyio

ERAS: list[ProtocolMode] = ["legacy", "modern"]


def config(**keys: Any) -> McpServerConfig:
    # The command is never run: every node here gets an in-process target.
    return McpServerConfig(command="in-process", **keys)


def toy_with_echo(*names: str, page_size: int | None = None) -> ToyServer:
    toy = ToyServer(page_size=page_size)
    for name in names:
        toy.add_echo(name, description=f"echoes for {name}")
    return toy


async def test_tools_carry_their_node_and_original_name() -> None:
    toy = toy_with_echo("echo")
    async with McpToolkit("toy", config(), target=toy.server) as node:
        assert isinstance(node, Toolkit)
        (tool,) = await node.list_tools()
        assert tool.name == "toy__echo"
        assert tool.original_name == "echo"
        assert tool.source_node == "toy"
        assert tool.is_from_toolkit
        assert tool.description == "echoes for echo"
        assert tool.input_schema == {"type": "object"}
        relayed = tool.definition
        assert relayed is not None
        assert relayed.name == "toy__echo"
        assert relayed.description == "echoes for echo"


async def test_calls_route_through_the_reverse_map_not_the_name() -> None:
    # Three tools that sanitise alike; each model-facing name must reach its own tool.
    toy = toy_with_echo("read.file", "read_file", "read file")
    async with McpToolkit("fs", config(prefix="never"), target=toy.server) as node:
        tools = await node.list_tools()
        assert len({tool.name for tool in tools}) == 3
        for tool in tools:
            result = await node.call_tool(tool.name, {"n": 1})
            assert result.content == [types.TextContent(text=f"{tool.original_name}:[('n', 1)]")]


async def test_an_unknown_name_is_an_unknown_tool() -> None:
    toy = toy_with_echo("echo")
    async with McpToolkit("toy", config(), target=toy.server) as node:
        with pytest.raises(NoSuchTool, match="'toy' has no tool named 'echo'"):
            await node.call_tool("echo", {})  # the original name is not the model's name


async def test_include_and_exclude_filter_on_original_names() -> None:
    toy = toy_with_echo("get_a", "get_secret", "set_a")
    async with McpToolkit(
        "t", config(include=["get_*"], exclude=["*secret*"]), target=toy.server
    ) as node:
        assert [tool.name for tool in await node.list_tools()] == ["t__get_a"]
        with pytest.raises(NoSuchTool):
            await node.call_tool("t__set_a", {})


async def test_an_include_glob_that_matches_nothing_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A typo in `include` (convert_unit) would leave the agent without its tool, silently.
    toy = toy_with_echo("convert_units", "text_stats")
    caplog.set_level("INFO", logger="toolkits.mcp.tb")
    keys = config(include=["convert_unit", "text_*"], exclude=["nothing_*"])
    async with McpToolkit("tb", keys, target=toy.server) as node:
        assert [tool.name for tool in await node.list_tools()] == ["tb__text_stats"]
        await node.refresh_tools()  # the same listing: said once
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "include 'convert_unit': matches no tool of the server (did you mean 'convert_units'?); "
        "the server's tools: convert_units, text_stats"
    ]
    notes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("exclude")]
    assert notes == ["exclude 'nothing_*': matches no tool of the server"]
    assert all(r.levelname == "INFO" for r in caplog.records if r.getMessage() in notes)


async def test_a_require_approval_glob_that_matches_nothing_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A typo in `require_approval` (delet_*) leaves the destructive tool ungated, silently.
    toy = toy_with_echo("delete_user", "echo")
    keys = config(require_approval=["delet_*", "s00_crm__echo", "nothing"])
    async with McpToolkit("s00_crm", keys, target=toy.server) as node:
        assert len(await node.list_tools()) == 2
        await node.refresh_tools()  # the same listing: said once
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "require_approval 'delet_*', 'nothing': match no tool of the server (did you mean "
        "'delete_user' for 'delet_*'?), so no call is gated by them"
    ]


async def test_a_tool_timeout_that_names_no_tool_is_warned_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A typo in `tool_timeouts` (export_cvs) holds the slow tool to the server's timeout.
    toy = toy_with_echo("export_csv", "echo")
    keys = config(tool_timeouts={"export_cvs": 600, "ech*": 5, "import_*": 60})
    async with McpToolkit("s", keys, target=toy.server) as node:
        assert len(await node.list_tools()) == 2
        await node.refresh_tools()  # the same listing: said once
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warnings == [
        "tool_timeouts 'export_cvs', 'import_*': match no tool of the server (did you mean "
        "'export_csv' for 'export_cvs'?); the server's tools: export_csv, echo"
    ]


async def test_globs_that_all_match_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    toy = toy_with_echo("get_a", "get_secret")
    caplog.set_level("INFO", logger="toolkits.mcp.t")
    keys = config(
        include=["get_*"],
        exclude=["*secret*"],
        require_approval=["t__get_a"],
        tool_timeouts={"get_a": 5, "get_*": 10},
    )
    async with McpToolkit("t", keys, target=toy.server) as node:
        assert len(await node.list_tools()) == 1
    assert "no tool of the server" not in caplog.text


@pytest.mark.parametrize("era", ERAS)
async def test_listing_follows_pagination(era: ProtocolMode) -> None:
    toy = toy_with_echo(*(f"tool_{i:03}" for i in range(250)), page_size=60)
    async with McpToolkit("many", config(protocol=era), target=toy.server) as node:
        tools = await node.list_tools()
        assert [tool.original_name for tool in tools] == [f"tool_{i:03}" for i in range(250)]
        assert toy.list_requests == 5
        result = await node.call_tool("many__tool_249", {})
        assert result.content == [types.TextContent(text="tool_249:[]")]


@pytest.mark.parametrize("era", ERAS)
async def test_list_changed_refreshes_the_tools(era: ProtocolMode) -> None:
    toy = toy_with_echo("echo")

    async def grow(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        toy.add_echo("added")
        await toy.announce_change(ctx)
        return text_result("grown")

    toy.add("grow", grow)
    changed = anyio.Event()

    async def on_change(node_name: str) -> None:
        assert node_name == "toy"
        changed.set()

    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        node.subscribe(on_change)
        assert node.health.protocol_version == ("2025-11-25" if era == "legacy" else "2026-07-28")
        await node.call_tool("toy__grow", {})
        with anyio.fail_after(5):
            await changed.wait()
        assert "toy__added" in {tool.name for tool in await node.list_tools()}
        result = await node.call_tool("toy__added", {"x": 1})
        assert result.content == [types.TextContent(text="added:[('x', 1)]")]


async def test_results_keep_every_content_kind() -> None:
    toy = ToyServer()

    async def kinds(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return content_kinds_result()

    async def fails(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text="no such city")], is_error=True)

    toy.add("kinds", kinds)
    toy.add("fails", fails)
    async with McpToolkit("toy", config(protocol="legacy"), target=toy.server) as node:
        result = await node.call_tool("toy__kinds", {})
        expected = content_kinds_result()
        assert result.content == expected.content
        assert result.structured_content == {"kinds": 6}
        assert result.meta == {"trace": "abc"}
        assert not result.is_error
        failed = await node.call_tool("toy__fails", {})
        assert failed.is_error
        assert failed.content == [types.TextContent(text="no such city")]


async def test_protocol_errors_come_back_as_error_results() -> None:
    toy = ToyServer()

    async def bad_params(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        raise MCPError(types.INVALID_PARAMS, "x must be positive")

    toy.add("strict", bad_params)
    async with McpToolkit("toy", config(), target=toy.server) as node:
        result = await node.call_tool("toy__strict", {"x": -1})
        assert result.is_error
        assert result.content == [types.TextContent(text="MCP error -32602: x must be positive")]


@pytest.mark.parametrize("era", ERAS)
async def test_a_servers_own_error_with_code_32000_is_its_answer_not_a_lost_connection(
    era: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    """-32000 is JSON-RPC's first code for a server's own errors, and the SDK's for a request
    it could not finish: a server's answer with it was taken for a closed connection ("went
    away ... reconnecting") and its connection dropped."""
    toy = ToyServer()

    async def busy(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        raise MCPError(-32000, "the database is busy")

    async def fine(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return text_result("ok")

    toy.add("busy", busy)
    toy.add("fine", fine)
    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        failed = await node.call_tool("toy__busy", {})
        assert failed.is_error
        assert failed.content == [types.TextContent(text="MCP error -32000: the database is busy")]
        assert (await node.call_tool("toy__fine", {})).content == [types.TextContent(text="ok")]
        assert node.health.state == "ready"
    assert not [r for r in caplog.records if "connection lost" in r.getMessage()]


@pytest.mark.parametrize("era", ERAS)
async def test_progress_reaches_the_caller(era: ProtocolMode) -> None:
    toy = ToyServer()
    toy.add_worker("work", interval=0)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        result = await node.call_tool(
            "toy__work", {"steps": 3}, context=CallContext(on_progress=on_progress)
        )
    assert result.content == [types.TextContent(text="worked")]
    assert seen == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]


@pytest.mark.parametrize("era", ERAS)
async def test_every_progress_is_delivered_in_order_before_the_result(era: ProtocolMode) -> None:
    # The server reports its last step and answers at once; a caller that takes a while with
    # each report (relaying it to its own client, say) must still have had all of them, in
    # order, when the call returns: a relay that sent the result first would lose the rest.
    toy = ToyServer()
    toy.add_worker("work", interval=0)
    seen: list[float] = []

    async def slow_on_progress(progress: float, _total: float | None, _message: str | None) -> None:
        for _ in range(int(10 - progress * 3)):  # the earlier the report, the slower
            await anyio.lowlevel.checkpoint()
        seen.append(progress)

    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        for _ in range(5):
            seen.clear()
            context = CallContext(on_progress=slow_on_progress)
            await node.call_tool("toy__work", {"steps": 3}, context=context)
            assert seen == [1, 2, 3]


@pytest.mark.parametrize("era", ERAS)
async def test_progress_restarts_the_timeout(era: ProtocolMode) -> None:
    # 8 steps of 0.1 s each: 0.8 s in all, far past the 0.3 s timeout, but never 0.3 s silent.
    toy = ToyServer()
    toy.add_worker("work", interval=0.1)
    async with McpToolkit(
        "toy", config(protocol=era, timeout=0.3, connect_timeout=30), target=toy.server
    ) as node:
        result = await node.call_tool("toy__work", {"steps": 8})
    assert result.content == [types.TextContent(text="worked")]


@pytest.mark.parametrize("era", ERAS)
async def test_progress_cannot_outrun_the_absolute_cap(era: ProtocolMode) -> None:
    toy = ToyServer()
    toy.add_worker("work", interval=0.05)
    cfg = config(protocol=era, timeout=0.3, max_timeout=0.6, connect_timeout=30)
    async with McpToolkit("toy", cfg, target=toy.server) as node:
        started = anyio.current_time()
        with pytest.raises(
            ToolTimeout, match=r"no result within 0\.6 s, the absolute limit"
        ) as caught:
            await node.call_tool("toy__work", {"steps": 1000})
        assert anyio.current_time() - started >= 0.6
        assert caught.value.seconds == 0.6


@pytest.mark.parametrize("era", ERAS)
async def test_a_silent_tool_times_out_and_is_cancelled_at_the_server(era: ProtocolMode) -> None:
    toy = toy_with_echo("echo")
    _, cancelled = toy.add_hanging("hang")
    async with McpToolkit(
        "toy", config(protocol=era, timeout=0.3, connect_timeout=30), target=toy.server
    ) as node:
        with pytest.raises(
            ToolTimeout,
            match=r"'toy__hang' of MCP server 'toy' timed out \(no result or progress for 0\.3 s\)",
        ):
            await node.call_tool("toy__hang", {})
        with anyio.fail_after(5):
            await cancelled.wait()
        # The session survives the timeout.
        assert (await node.call_tool("toy__echo", {})).content == [
            types.TextContent(text="echo:[]")
        ]
        assert node.health.state == "ready"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_given_its_own_timeout_outlasts_the_servers(era: ProtocolMode) -> None:
    # `report_sales` may go 30 s without a sign of life; `hang`, called after it, is still
    # held to the server's 0.3 s, and by the time that ends `report_sales` has been silent
    # longer than that.
    toy = toy_with_echo("echo")
    _, hang_cancelled = toy.add_hanging("hang")
    reporting, release = anyio.Event(), anyio.Event()

    async def report(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        reporting.set()
        await release.wait()
        return text_result("reported")

    toy.add("report_sales", report)
    keys = config(protocol=era, timeout=0.3, tool_timeouts={"report_*": 30})
    reported: list[types.CallToolResult] = []
    async with McpToolkit("toy", keys, target=toy.server) as node:

        async def call_report() -> None:
            reported.append(await node.call_tool("toy__report_sales", {}))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(call_report)
                await reporting.wait()
                with pytest.raises(ToolTimeout, match=r"no result or progress for 0\.3 s") as hung:
                    await node.call_tool("toy__hang", {})
                assert hung.value.seconds == 0.3
                await hang_cancelled.wait()
                release.set()
    assert [result.content for result in reported] == [[types.TextContent(text="reported")]]


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_the_caller_cancels_the_call(era: ProtocolMode) -> None:
    toy = toy_with_echo("echo")
    started, cancelled = toy.add_hanging("hang")
    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        async with anyio.create_task_group() as tg:
            tg.start_soon(node.call_tool, "toy__hang", dict[str, Any]())
            with anyio.fail_after(5):
                await started.wait()
            tg.cancel_scope.cancel()
        with anyio.fail_after(5):
            await cancelled.wait()
        assert (await node.call_tool("toy__echo", {})).content == [
            types.TextContent(text="echo:[]")
        ]


async def test_a_server_that_dies_mid_call_fails_the_call_and_comes_back() -> None:
    toy = toy_with_echo("echo")
    started, _ = toy.add_hanging("hang")
    crashable = CrashableTransport(toy.server)
    async with McpToolkit("toy", config(), target=crashable.connect) as node:
        assert node.health.state == "ready"

        async def crash_once_started() -> None:
            await started.wait()
            crashable.crash()

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tg:
                tg.start_soon(crash_once_started)
                with pytest.raises(ConnectionLost, match="'toy' went away"):
                    await node.call_tool("toy__hang", {})
            # The next call waits for the reconnect and works.
            assert (await node.call_tool("toy__echo", {})).content == [
                types.TextContent(text="echo:[]")
            ]
        assert crashable.connections == 2
        assert node.health.state == "ready"
        assert node.health.last_error is not None
        assert "closed" in node.health.last_error


async def test_a_server_that_dies_while_idle_is_reconnected() -> None:
    toy = toy_with_echo("echo")
    crashable = CrashableTransport(toy.server)
    renamed = anyio.Event()

    async def tools_changed(_node: str) -> None:
        renamed.set()

    async with McpToolkit("toy", config(), target=crashable.connect) as node:
        assert crashable.connections == 1
        node.subscribe(tools_changed)
        crashable.crash()
        with anyio.fail_after(5):
            await node.wait_for_health(
                lambda health: health.state == "ready" and crashable.connections == 2
            )
        assert (await node.call_tool("toy__echo", {})).content == [
            types.TextContent(text="echo:[]")
        ]
    assert not renamed.is_set()  # same tools after the reconnect: nothing to announce


async def test_health_follows_the_lifecycle() -> None:
    toy = toy_with_echo("echo", "other")
    node = McpToolkit("toy", config(protocol="modern"), target=toy.server)
    assert node.health.state == "stopped"
    with pytest.raises(ServerUnavailable, match="'toy' is not running"):
        await node.refresh_tools()
    async with node:
        health = node.health
        assert (health.state, health.tool_count, health.protocol_version) == (
            "ready",
            2,
            "2026-07-28",
        )
        assert str(health).startswith("toy: ready since ")
        assert "2 tools, protocol 2026-07-28" in str(health)
        with pytest.raises(RuntimeError, match="already running"):
            await node.run()
    assert node.health.state == "stopped"


def test_a_health_line_counts_one_tool_in_the_singular() -> None:
    since = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    one = NodeHealth(node="calc", state="ready", since=since, tool_count=1)
    assert str(one) == "calc: ready since 2026-01-02 03:04:05Z, 1 tool"
    assert ", 3 tools" in str(NodeHealth(node="calc", state="ready", since=since, tool_count=3))
