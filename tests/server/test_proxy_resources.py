"""Proxy mode: the nodes' resources and templates, served as one set and read through us."""

from __future__ import annotations

import logging

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway import Gateway
from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from tests.servers.restarting import Restarting
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

from .proxying import Heard, listening, mcp_nodes
from .support import ERAS, calculator_gateway, serve

pytestmark = pytest.mark.anyio


def docs_and_notes() -> tuple[CatalogServer, CatalogServer]:
    docs = CatalogServer("docs", page_size=2)
    for i in range(3):
        docs.add_resource(f"memo://docs/{i}", f"doc {i}")
    docs.add_resource("memo://shared/1", "the docs' copy")
    docs.add_template("memo://made/{id}", "made")
    notes = CatalogServer("notes", page_size=2)
    notes.add_resource("note://n/1", "note 1")
    notes.add_resource("memo://shared/1", "the notes' copy")
    notes.add_template("note://t/{slug}", "by slug")
    notes.add_template("memo://made/{id}", "made too")
    return docs, notes


def text_of(result: types.ReadResourceResult) -> str:
    [contents] = result.contents
    assert isinstance(contents, types.TextResourceContents)
    return contents.text


@pytest.mark.parametrize("era", ERAS)
async def test_every_nodes_resources_are_listed_and_read_through_us(era: str) -> None:
    docs, notes = docs_and_notes()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        resources = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        listed = await client.read_resource("memo://docs/1")
        other_node = await client.read_resource("note://n/1")
        by_template = await client.read_resource("note://t/hello")
    assert [r.uri for r in resources] == [
        "memo://docs/0",
        "memo://docs/1",
        "memo://docs/2",
        "memo://shared/1",
        "note://n/1",
    ]
    assert [t.uri_template for t in templates] == ["memo://made/{id}", "note://t/{slug}"]
    assert resources[0].mime_type == "text/plain"
    assert listed.contents == [
        types.TextResourceContents(uri="memo://docs/1", text="doc 1", mime_type="text/plain")
    ]
    assert text_of(other_node) == "note 1"
    assert text_of(by_template) == "notes made note://t/hello"
    # Each read carried the hop count on to the node's server.
    assert docs.seen_meta[0]["agent-gateway/hops"] == 1


@pytest.mark.parametrize("era", ERAS)
async def test_on_a_clash_the_first_node_serves_it(
    era: str, caplog: pytest.LogCaptureFixture
) -> None:
    docs, notes = docs_and_notes()
    caplog.set_level(logging.WARNING, logger="gateway.catalog")
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        listed: list[str] = []
        for _ in range(3):  # a clash is warned of once, not at every listing
            listed = [r.uri for r in (await client.list_resources()).resources]
            await client.list_resource_templates()
        shared = await client.read_resource("memo://shared/1")
        made = await client.read_resource("memo://made/5")
    assert listed.count("memo://shared/1") == 1
    assert text_of(shared) == "the docs' copy"
    assert text_of(made) == "docs made memo://made/5"
    warnings = [r.getMessage() for r in caplog.records]
    clash = "resource 'memo://shared/1' is listed by nodes 'docs' and 'notes'; serving 'docs''s"
    assert warnings.count(clash) == 1
    assert len([w for w in warnings if "resource template 'memo://made/{id}'" in w]) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_reads_are_routed_without_a_listing_first(era: str) -> None:
    docs, notes = docs_and_notes()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        result = await client.read_resource("note://t/unlisted")
        with pytest.raises(MCPError, match="no proxied server offers the resource 'x://y'"):
            await client.read_resource("x://y")
    assert text_of(result) == "notes made note://t/unlisted"


@pytest.mark.parametrize("era", ERAS)
async def test_a_lone_node_is_asked_for_any_uri_and_its_errors_are_relayed(era: str) -> None:
    docs, _notes = docs_and_notes()
    async with (
        mcp_nodes(("docs", docs)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        with pytest.raises(MCPError, match="no resource memo://unlisted") as raised:
            await client.read_resource("memo://unlisted")
    assert raised.value.code == types.INVALID_PARAMS


async def test_without_mcp_nodes_no_resources_or_prompts_are_served() -> None:
    async with Client(serve(calculator_gateway(), expose_tools=True)) as client:
        capabilities = client.server_capabilities
    assert capabilities.resources is None
    assert capabilities.prompts is None
    assert capabilities.completions is None


@pytest.mark.parametrize("era", ERAS)
async def test_a_cursor_on_a_list_served_whole_is_invalid(era: str) -> None:
    docs, notes = docs_and_notes()
    docs.add_prompt("greet", "who")
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        refused: list[MCPError] = []
        for listing in (
            client.list_resources,
            client.list_resource_templates,
            client.list_prompts,
            client.list_tools,
        ):
            with pytest.raises(MCPError) as raised:
                await listing(cursor="zzz")
            refused.append(raised.value)
        # Every node's second page is in the one page the gateway serves.
        resources = (await client.list_resources()).resources
    assert [error.code for error in refused] == [types.INVALID_PARAMS] * 4
    assert "cursor 'zzz' is not one of this server's" in refused[0].message
    assert "serves resources/list in one page" in refused[0].message
    assert len(resources) == 5


@pytest.mark.parametrize("era", ERAS)
async def test_a_long_uri_is_quoted_short(era: str) -> None:
    docs, notes = docs_and_notes()
    uri = "x://" + "y" * 100_000
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        with pytest.raises(MCPError) as raised:
            await client.read_resource(uri)
    said = raised.value.message
    assert said.startswith("no proxied server offers the resource 'x://yyy")
    assert said.endswith("'... (100004 characters)")
    assert len(said) < 300


@pytest.mark.parametrize("down", ["auto", "modern"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_restarted_servers_catalog_is_served_at_once_and_announced(
    era: str, down: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    """Its server restarted over HTTP with a resource and a prompt more, forgetting the node's
    session (2025-11-25): the first requests after it are answered in full, not left out, and
    the clients are told its lists may have changed."""
    caplog.set_level(logging.WARNING, logger="gateway.catalog")
    docs = CatalogServer("docs")
    docs.add_resource("memo://docs/1", "doc 1")
    docs.add_prompt("greet", "who")
    front = Restarting(lambda: docs.server.streamable_http_app(host="127.0.0.1"), event_stream=405)
    heard = Heard()
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(front.run)
            async with (
                serve_on_loopback(front) as base,
                McpToolkit("docs", McpServerConfig(url=f"{base}/mcp", protocol=down)) as node,
                Client(
                    serve(Gateway([node], []), expose_tools=True),
                    mode=era,
                    message_handler=heard.on_message if era == "legacy" else None,
                ) as client,
                listening(client, heard),
            ):
                await client.list_resources()
                docs.add_resource("memo://docs/2", "doc 2")
                docs.add_prompt("bye")
                await front.restart()
                resources = (await client.list_resources()).resources
                prompts = (await client.list_prompts()).prompts
                read = await client.read_resource("memo://docs/2")
                prompt = await client.get_prompt("docs__greet", {"who": "Ada"})
                await heard.until(kinds={"prompts", "resources"})
                assert [r.uri for r in resources] == ["memo://docs/1", "memo://docs/2"]
                assert [p.name for p in prompts] == ["docs__greet", "docs__bye"]
                assert text_of(read) == "doc 2"
                said = prompt.messages[0].content
                assert said == types.TextContent(text="docs/greet [('who', 'Ada')]")
            tg.cancel_scope.cancel()
    assert not [r for r in caplog.records if r.name == "gateway.catalog"]  # none left out
