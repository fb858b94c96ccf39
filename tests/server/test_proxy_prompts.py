"""Proxy mode: the nodes' prompts under prefixed names, and completions routed by reference."""

from __future__ import annotations

import logging

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway import Gateway
from tests.servers.catalog import CatalogServer

from .proxying import mcp_nodes
from .support import ERAS, serve

pytestmark = pytest.mark.anyio


def servers() -> tuple[CatalogServer, CatalogServer]:
    docs = CatalogServer("docs", page_size=1)
    docs.add_prompt("greet", "who", description="Greets someone.")
    docs.add_prompt("summary", "topic")
    docs.add_template("memo://made/{id}")
    docs.completions["greet:who"] = ["Ada", "Alan", "Grace"]
    docs.completions["memo://made/{id}:id"] = ["1", "12", "2"]
    notes = CatalogServer("notes")
    notes.add_prompt("greet", "who")
    notes.add_prompt("jot")
    notes.completions["greet:who"] = ["Noor", "Nils"]
    return docs, notes


def text_of(result: types.GetPromptResult) -> str:
    [message] = result.messages
    assert isinstance(message.content, types.TextContent)
    return message.content.text


@pytest.mark.parametrize("era", ERAS)
async def test_prompts_are_named_by_each_nodes_prefix_policy(era: str) -> None:
    docs, notes = servers()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes), prefix="auto") as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        prompts = (await client.list_prompts()).prompts
        docs_greet = await client.get_prompt("docs__greet", {"who": "Ada"})
        notes_greet = await client.get_prompt("notes__greet", {"who": "Noor"})
        jot = await client.get_prompt("jot")
    # `auto`: only the name both nodes offer is prefixed.
    assert [p.name for p in prompts] == ["docs__greet", "summary", "notes__greet", "jot"]
    assert prompts[0].description == "Greets someone."
    assert prompts[0].arguments == [types.PromptArgument(name="who", required=True)]
    assert text_of(docs_greet) == "docs/greet [('who', 'Ada')]"
    assert docs_greet.description == "prompt greet"
    assert text_of(notes_greet) == "notes/greet [('who', 'Noor')]"
    assert text_of(jot) == "notes/jot []"


async def test_each_nodes_own_policy_applies() -> None:
    docs, notes = servers()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes, {"prefix": "never"})) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True)) as client,
    ):
        names = [p.name for p in (await client.list_prompts()).prompts]
    assert names == ["docs__greet", "docs__summary", "greet", "jot"]


async def test_a_prompt_clash_is_warned_of_once_as_a_prompt(
    caplog: pytest.LogCaptureFixture,
) -> None:
    docs, notes = servers()
    caplog.set_level(logging.WARNING, logger="toolkits.mcp.naming")
    async with (
        mcp_nodes(("docs", docs), ("notes", notes), prefix="never") as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True)) as client,
    ):
        names: list[str] = []
        for _ in range(3):
            names = [p.name for p in (await client.list_prompts()).prompts]
    assert names == ["greet", "summary", "notes__greet", "jot"]
    assert [r.getMessage() for r in caplog.records] == [
        "server 'notes': 1 prompt clashes with server 'docs', which also has prefix='never' "
        "and keeps the bare name: offering it as notes__NAME (greet)"
    ]


@pytest.mark.parametrize("era", ERAS)
async def test_completions_are_routed_by_prompt_name_and_template(era: str) -> None:
    docs, notes = servers()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        docs_names = await client.complete(
            types.PromptReference(name="docs__greet"), {"name": "who", "value": "A"}
        )
        notes_names = await client.complete(
            types.PromptReference(name="notes__greet"), {"name": "who", "value": "N"}
        )
        ids = await client.complete(
            types.ResourceTemplateReference(uri="memo://made/{id}"), {"name": "id", "value": "1"}
        )
    assert docs_names.completion.values == ["Ada", "Alan"]
    assert notes_names.completion.values == ["Noor", "Nils"]
    assert ids.completion.values == ["1", "12"]


@pytest.mark.parametrize("era", ERAS)
async def test_unknown_prompts_are_mcp_errors(era: str) -> None:
    docs, notes = servers()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        with pytest.raises(MCPError, match="no prompt named 'greet'") as raised:
            await client.get_prompt("greet")
        with pytest.raises(MCPError, match="no prompt named 'nope'"):
            await client.complete(types.PromptReference(name="nope"), {"name": "a", "value": ""})
        with pytest.raises(MCPError) as long_name:
            await client.get_prompt("p" * 50_000)
    assert raised.value.code == types.INVALID_PARAMS
    assert "docs__greet" in raised.value.error.message
    # A name as long as a client likes is quoted in its first 200 characters.
    said = long_name.value.error.message
    assert f"no prompt named {'p' * 200!r}... (50000 characters) (prompts: " in said
    assert len(said) < 400


async def test_a_completion_for_an_unknown_template_is_an_mcp_error() -> None:
    docs, notes = servers()
    async with (
        mcp_nodes(("docs", docs), ("notes", notes)) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True)) as client,
    ):
        with pytest.raises(MCPError, match=r"no proxied server offers the template 'x://\{y\}'"):
            await client.complete(
                types.ResourceTemplateReference(uri="x://{y}"), {"name": "y", "value": ""}
            )
