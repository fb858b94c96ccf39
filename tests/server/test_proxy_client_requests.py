"""Proxy mode: a node's server asks its client during a call, and our client answers.

Every pairing of eras: our client on 2025-11-25 (asked over the back-channel) or 2026-07-28
(asked in input-required rounds while the proxied call waits, parked), and the node's server
on either (asking with requests, or in rounds of its own).
"""

from __future__ import annotations

import anyio
import mcp_types as types
import pytest
from mcp import Client

from gateway import Gateway
from tests.servers.catalog import CatalogServer
from tests.servers.inprocess import ToyServer
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

from .proxying import ClientAnswers, mcp_nodes
from .support import ERAS, serve

pytestmark = pytest.mark.anyio

DOWNSTREAM: list[ProtocolMode] = ["legacy", "modern"]


@pytest.mark.parametrize("down", DOWNSTREAM)
@pytest.mark.parametrize("era", ERAS)
async def test_the_servers_questions_reach_our_client(era: str, down: ProtocolMode) -> None:
    asker = CatalogServer("asker")
    answers = ClientAnswers()
    async with (
        mcp_nodes(("asker", asker), protocol=down) as nodes,
        Client(
            serve(Gateway(nodes, []), expose_tools=True), mode=era, **answers.callbacks()
        ) as client,
    ):
        sampled = await client.call_tool("asker__sample", {"text": "what is 6 * 7?"})
        elicited = await client.call_tool("asker__elicit", {})
        roots = await client.call_tool("asker__roots", {})
    assert result_text(sampled) == "sampled '42' from upstream-model"
    assert result_text(elicited) == "elicited accept {'name': 'Ada'}"
    assert result_text(roots) == "roots ['file:///work']"
    [params] = answers.sampled
    assert params.messages[0].content == types.TextContent(text="what is 6 * 7?")
    [form] = answers.elicited
    assert form.message == "Your name?"
    assert answers.roots_asked == 1


@pytest.mark.parametrize("down", DOWNSTREAM)
@pytest.mark.parametrize("era", ERAS)
async def test_a_client_without_the_capability_is_never_asked(era: str, down: ProtocolMode) -> None:
    asker = CatalogServer("asker")
    async with (
        mcp_nodes(("asker", asker), protocol=down) as nodes,
        Client(serve(Gateway(nodes, []), expose_tools=True), mode=era) as client,
    ):
        results = {
            tool: await client.call_tool(f"asker__{tool}", {})
            for tool in ("sample", "elicit", "roots")
        }
    for tool, lacking in [("sample", "sampling"), ("elicit", "elicitation"), ("roots", "roots")]:
        assert results[tool].is_error, tool
        assert f"the upstream client lacks {lacking}" in result_text(results[tool])


@pytest.mark.parametrize("down", DOWNSTREAM)
@pytest.mark.parametrize("era", ERAS)
async def test_a_prompt_that_asks_reaches_our_client(era: str, down: ProtocolMode) -> None:
    asker = CatalogServer("asker")
    asker.add_prompt("ask")
    answers = ClientAnswers()
    async with (
        mcp_nodes(("asker", asker), protocol=down) as nodes,
        Client(
            serve(Gateway(nodes, []), expose_tools=True), mode=era, **answers.callbacks()
        ) as client,
    ):
        prompt = await client.get_prompt("asker__ask")
    assert prompt.messages[0].content == types.TextContent(text="sampled '42' from upstream-model")
    assert len(answers.sampled) == 1


@pytest.mark.parametrize("era", ERAS)
async def test_cancelling_a_proxied_call_cancels_it_at_the_server(era: str) -> None:
    # On 2026-07-28 the call runs in a task of its own (so it can wait across rounds); the
    # client giving up must still reach the server.
    toy = ToyServer("toy")
    started, cancelled = toy.add_hanging("hang")
    node = McpToolkit("toy", McpServerConfig(command="in-process"), target=toy.server)
    async with node, Client(serve(Gateway([node], []), expose_tools=True), mode=era) as client:
        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                no_arguments: dict[str, object] = {}
                tg.start_soon(client.call_tool, "toy__hang", no_arguments)
                await started.wait()
                tg.cancel_scope.cancel()
            await cancelled.wait()
