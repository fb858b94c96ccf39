"""`resource_tools = true`: a server's resources read by a model through two tools of its node
(in-process SDK servers, both protocol eras)."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import pytest

from tests.servers.catalog import CatalogServer
from tests.servers.inprocess import CrashableTransport, ToyServer
from toolkits.base import CallContext
from toolkits.errors import ServerUnavailable
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.observation import result_data, result_media, result_text

pytestmark = pytest.mark.anyio

ERAS: list[ProtocolMode] = ["legacy", "modern"]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(24)


def config(**keys: Any) -> McpServerConfig:
    # The command is never run: the node gets the in-process server as its target.
    return McpServerConfig(command="in-process", **keys)


def catalog() -> CatalogServer:
    server = CatalogServer()
    server.add_resource("memo://notes/1", "note one")
    server.add_blob("memo://pictures/dot.png", "image/png", PNG)
    server.add_blob("memo://archive.zip", "application/zip", bytes(300))
    server.add_template("memo://notes/{id}", name="note")
    return server


async def test_the_tools_are_offered_only_when_asked_for_and_named_as_the_servers() -> None:
    server = catalog()
    async with McpToolkit("memo", config(), target=server.server) as node:
        assert not {t.name for t in await node.list_tools()} & {
            "memo__read_resource",
            "memo__list_resources",
        }
    async with McpToolkit("memo", config(resource_tools=True), target=server.server) as node:
        tools = {t.name: t for t in await node.list_tools()}
    assert {"memo__list_resources", "memo__read_resource"} <= set(tools)
    read = tools["memo__read_resource"]
    assert read.input_schema["required"] == ["uri"]
    assert read.annotations["readOnlyHint"] is True
    assert "'memo'" in read.description
    async with McpToolkit(
        "memo", config(resource_tools=True, prefix="never"), target=server.server
    ) as node:
        assert {"list_resources", "read_resource"} <= {t.name for t in await node.list_tools()}


@pytest.mark.parametrize("protocol", ERAS)
async def test_read_resource_gives_text_blobs_and_images_as_a_model_reads_them(
    protocol: ProtocolMode,
) -> None:
    server = catalog()
    async with McpToolkit(
        "memo", config(resource_tools=True, protocol=protocol), target=server.server
    ) as node:
        with anyio.fail_after(10):
            text = await node.call_tool("memo__read_resource", {"uri": "memo://notes/1"})
            filled = await node.call_tool("memo__read_resource", {"uri": "memo://notes/7"})
            image = await node.call_tool("memo__read_resource", {"uri": "memo://pictures/dot.png"})
            archive = await node.call_tool("memo__read_resource", {"uri": "memo://archive.zip"})
    assert result_data(text) == {"response": "[resource: memo://notes/1 (text/plain)]\nnote one"}
    assert result_text(filled).endswith("catalog made memo://notes/7")  # from its template
    assert result_text(image) == "[resource: memo://pictures/dot.png, image/png, 32 bytes]"
    (media,) = result_media(image)
    assert (media.kind, base64.b64decode(media.data)) == ("image", PNG)
    assert result_text(archive) == "[resource: memo://archive.zip, application/zip, 300 bytes]"
    assert not any(r.is_error for r in (text, filled, image, archive))


async def test_a_read_carries_the_callers_meta_to_the_server() -> None:
    server = catalog()
    async with McpToolkit("memo", config(resource_tools=True), target=server.server) as node:
        context = CallContext(meta={"hops": 2})
        await node.call_tool("memo__read_resource", {"uri": "memo://notes/1"}, context=context)
    assert server.seen_meta[-1].get("hops") == 2


async def test_list_resources_lists_resources_then_templates() -> None:
    server = catalog()
    async with McpToolkit("memo", config(resource_tools=True), target=server.server) as node:
        listed = await node.call_tool("memo__list_resources", {})
    assert result_text(listed).splitlines() == [
        "memo://notes/1  1 (text/plain)",
        "memo://pictures/dot.png  dot.png (image/png)",
        "memo://archive.zip  archive.zip (application/zip)",
        "Resource templates (fill in the {placeholders} to read one):",
        "memo://notes/{id}  note",
    ]


async def test_a_server_without_resources_gets_neither_tool_and_a_warning_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """It declares no `resources` capability (at the 2025-11-25 handshake; 2026-07-28's
    discovery: `test_mcp_http`): the two were offered anyway, to fail each call."""
    toy = ToyServer()
    toy.add_echo("echo")
    async with McpToolkit("toy", config(resource_tools=True), target=toy.server) as node:
        assert [t.name for t in await node.list_tools()] == ["toy__echo"]
        assert [t.name for t in await node.refresh_tools()] == ["toy__echo"]
    assert caplog.text.count("resource_tools has no effect") == 1, caplog.text
    assert "no `resources` capability" in caplog.text


async def test_without_discovery_a_server_without_resources_says_so() -> None:
    """`protocol = "modern"` learns no capabilities: the tools are offered, and the server's
    answers say it has none."""
    toy = ToyServer()
    toy.add_echo("echo")
    async with McpToolkit(
        "toy", config(resource_tools=True, protocol="modern"), target=toy.server
    ) as node:
        listed = await node.call_tool("toy__list_resources", {})
        read = await node.call_tool("toy__read_resource", {"uri": "memo://x"})
    assert result_text(listed) == "MCP server 'toy' lists no resources."
    assert read.is_error
    assert result_text(read).startswith("MCP server 'toy' could not read 'memo://x': MCP error")


async def test_a_server_that_has_resources_after_a_reconnect_gets_the_tools_then(
    caplog: pytest.LogCaptureFixture,
) -> None:
    before, after = ToyServer(), ToyServer(resources=True)
    before.add_echo("echo")
    after.add_echo("echo")
    crashable = CrashableTransport(before.server)
    async with McpToolkit("toy", config(resource_tools=True), target=crashable.connect) as node:
        assert [t.name for t in await node.list_tools()] == ["toy__echo"]
        crashable.server = after.server  # it restarts with resources
        crashable.crash()
        with anyio.fail_after(10):
            await node.wait_for_health(lambda h: h.state == "ready" and h.tool_count == 3)
        names = {t.name for t in await node.list_tools()}
        listed = await node.call_tool("toy__list_resources", {})
    assert names == {"toy__echo", "toy__list_resources", "toy__read_resource"}
    assert result_text(listed) == "MCP server 'toy' lists no resources."
    assert crashable.connections == 2
    assert caplog.text.count("resource_tools has no effect") == 1


async def test_an_unknown_uri_or_none_at_all_is_a_tool_error_the_model_reads() -> None:
    server = catalog()
    async with McpToolkit("memo", config(resource_tools=True), target=server.server) as node:
        unknown = await node.call_tool("memo__read_resource", {"uri": "memo://nope"})
        missing = await node.call_tool("memo__read_resource", {})
        not_text = await node.call_tool("memo__read_resource", {"uri": 42})
    assert unknown.is_error
    assert result_text(unknown) == (
        "MCP server 'memo' could not read 'memo://nope': MCP error -32602: no resource memo://nope"
    )
    for result in (missing, not_text):
        assert result.is_error
        assert result_text(result) == "read_resource needs `uri`, the resource's URI as a string"


async def test_a_server_that_is_down_fails_the_read_as_a_node_error() -> None:
    server = catalog()
    async with McpToolkit("memo", config(resource_tools=True), target=server.server) as node:
        await node.list_tools()
    # The node stopped: its server is gone, which is no answer of the server's.
    with pytest.raises(ServerUnavailable):
        await node.call_tool("memo__read_resource", {"uri": "memo://notes/1"})


async def test_the_servers_own_tool_of_that_name_keeps_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    toy = ToyServer(resources=True)
    toy.add_echo("read_resource")
    async with McpToolkit("toy", config(resource_tools=True), target=toy.server) as node:
        tools = {t.name: t for t in await node.list_tools()}
        result = await node.call_tool("toy__read_resource", {"uri": "memo://x"})
    assert set(tools) == {"toy__read_resource", "toy__list_resources"}
    assert result_text(result) == "read_resource:[('uri', 'memo://x')]"  # the server's echo
    assert "the server has tools named 'read_resource': they stay the server's" in caplog.text
