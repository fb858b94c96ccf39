"""A node's catalog: resources, templates, prompts and completions, fetched live (both eras)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from tests.servers.catalog import CatalogServer
from tests.servers.inprocess import ToyServer
from toolkits import CallContext
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

pytestmark = pytest.mark.anyio

ERAS: list[ProtocolMode] = ["legacy", "modern"]


def config(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command="in-process", **keys)


def docs_server(*, page_size: int | None = None) -> CatalogServer:
    docs = CatalogServer("docs", page_size=page_size)
    for i in range(5):
        docs.add_resource(f"memo://docs/{i}", f"doc {i}")
    docs.add_template("memo://made/{id}", "made")
    docs.add_template("memo://other/{id}", "other")
    docs.add_prompt("greet", "who")
    docs.add_prompt("plain")
    docs.add_prompt("summary", "topic")
    docs.completions["greet:who"] = ["Ada", "Alan", "Grace"]
    docs.completions["memo://made/{id}:id"] = ["1", "12", "2"]
    return docs


@pytest.mark.parametrize("era", ERAS)
async def test_every_page_of_each_list_is_fetched(era: ProtocolMode) -> None:
    docs = docs_server(page_size=2)
    async with McpToolkit("docs", config(protocol=era), target=docs.server) as node:
        resources = await node.catalog.list_resources()
        templates = await node.catalog.list_resource_templates()
        prompts = await node.catalog.list_prompts()
    assert [r.uri for r in resources] == [f"memo://docs/{i}" for i in range(5)]
    assert [t.uri_template for t in templates] == ["memo://made/{id}", "memo://other/{id}"]
    assert [p.name for p in prompts] == ["greet", "plain", "summary"]  # the server's own names


@pytest.mark.parametrize("era", ERAS)
async def test_reads_prompts_and_completions_reach_the_server(era: ProtocolMode) -> None:
    docs = docs_server()
    async with McpToolkit("docs", config(protocol=era), target=docs.server) as node:
        read = await node.catalog.read_resource(
            "memo://docs/3", context=CallContext(meta={"example/trace": "t"})
        )
        made = await node.catalog.read_resource("memo://made/9")
        prompt = await node.catalog.get_prompt("greet", {"who": "Ada"})
        names = await node.catalog.complete(
            types.PromptReference(name="greet"), types.CompletionArgument(name="who", value="A")
        )
        ids = await node.catalog.complete(
            types.ResourceTemplateReference(uri="memo://made/{id}"),
            types.CompletionArgument(name="id", value="1"),
        )
    assert read.contents == [
        types.TextResourceContents(uri="memo://docs/3", text="doc 3", mime_type="text/plain")
    ]
    assert docs.seen_meta[0]["example/trace"] == "t"
    assert isinstance(made.contents[0], types.TextResourceContents)
    assert made.contents[0].text == "docs made memo://made/9"
    assert prompt.messages[0].content == types.TextContent(text="docs/greet [('who', 'Ada')]")
    assert names.completion.values == ["Ada", "Alan"]
    assert ids.completion.values == ["1", "12"]


@pytest.mark.parametrize("era", ERAS)
async def test_the_servers_own_errors_come_back_as_its_mcp_errors(era: ProtocolMode) -> None:
    docs = docs_server()
    async with McpToolkit("docs", config(protocol=era), target=docs.server) as node:
        with pytest.raises(MCPError, match="no prompt missing") as prompt_error:
            await node.catalog.get_prompt("missing")
        with pytest.raises(MCPError, match="no resource memo://nowhere"):
            await node.catalog.read_resource("memo://nowhere")
    assert prompt_error.value.code == types.INVALID_PARAMS


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_without_the_features_lists_none(era: ProtocolMode) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    async with McpToolkit("toy", config(protocol=era), target=toy.server) as node:
        assert await node.catalog.list_resources() == []
        assert await node.catalog.list_resource_templates() == []
        assert await node.catalog.list_prompts() == []
        nothing = await node.catalog.complete(
            types.PromptReference(name="x"), types.CompletionArgument(name="a", value="")
        )
    assert nothing.completion.values == []


async def test_a_handshake_era_servers_first_session_says_its_lists_appeared() -> None:
    """Whoever listed before the server came up hears that they may have changed (on
    2026-07-28 its listen stream's start says so: the test below)."""
    heard: set[tuple[str, str]] = set()
    both = anyio.Event()

    def hear(kind: str) -> Callable[[str], Awaitable[None]]:
        async def on_change(node: str) -> None:
            heard.add((kind, node))
            if {kind for kind, _ in heard} == {"prompts", "resources"}:
                both.set()

        return on_change

    node = McpToolkit("docs", config(protocol="legacy"), target=docs_server().server)
    node.subscribe_prompts(hear("prompts"))
    node.subscribe_resources(hear("resources"))
    with anyio.fail_after(5):
        async with node:
            await both.wait()
    assert heard == {("prompts", "docs"), ("resources", "docs")}


@pytest.mark.parametrize("era", ERAS)
async def test_prompt_and_resource_changes_reach_the_subscribers(era: ProtocolMode) -> None:
    docs = docs_server()
    prompts_changed, resources_changed = anyio.Event(), anyio.Event()

    async def on_prompts(node: str) -> None:
        assert node == "docs"
        prompts_changed.set()

    async def on_resources(node: str) -> None:
        resources_changed.set()

    async with McpToolkit("docs", config(protocol=era), target=docs.server) as node:
        node.subscribe_prompts(on_prompts)
        node.subscribe_resources(on_resources)
        if era == "modern":
            # A listen stream replays nothing, so its start counts as a possible change.
            with anyio.fail_after(5):
                await prompts_changed.wait()
                await resources_changed.wait()
            prompts_changed, resources_changed = anyio.Event(), anyio.Event()
        await node.call_tool("docs__change", {"lists": ["prompts", "resources"]})
        with anyio.fail_after(5):
            await prompts_changed.wait()
            await resources_changed.wait()
        assert "added_3" in [p.name for p in await node.catalog.list_prompts()]
        assert "memo://added/5" in [r.uri for r in await node.catalog.list_resources()]
