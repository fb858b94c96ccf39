"""A served agent's tool server asks for elicitation mid-call: the MCP client that called the
agent answers, if it can be asked during the call and declared elicitation; else the server
hears precisely why nobody can. Sampling stays the agent's own model's to answer."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client

from agent import ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from tests.servers.catalog import CatalogServer
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

from .proxying import ClientAnswers
from .support import call, serve

pytestmark = pytest.mark.anyio

DOWNSTREAM: list[ProtocolMode] = ["legacy", "modern"]


async def observed(era: str, down: ProtocolMode, answers: ClientAnswers, **declared: Any) -> str:
    """What the agent's model read of `asker__elicit` and of `asker__sample`, called for a
    client of `era` declaring `declared`."""
    model = ScriptedModel(
        [call("asker__elicit"), call("asker__sample", text="a colour?"), "blue", "done"]
    )
    spec = AgentSpec("helper", model, tools=["asker"], description="A helper agent.")
    config = McpServerConfig(command="in-process", protocol=down)
    with anyio.fail_after(20):
        async with (
            McpToolkit("asker", config, target=CatalogServer("asker").server) as node,
            Client(serve(Gateway([node], [spec])), mode=era, **declared) as client,
        ):
            result = await client.call_tool("helper", {"prompt": "ask me"})
    assert not result.is_error
    seen = [m.content for m in model.calls[-1][0] if isinstance(m, ToolMessage)]
    assert seen[1] == "sampled 'blue' from scripted"  # the agent's model, whoever called
    assert answers.sampled == []
    return seen[0]


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_a_2025_client_answers_the_elicitation_of_a_served_agents_tool(
    down: ProtocolMode,
) -> None:
    answers = ClientAnswers()
    seen = await observed("legacy", down, answers, **answers.callbacks())
    assert seen == "elicited accept {'name': 'Ada'}"
    [asked] = answers.elicited
    assert asked.message == "Your name?"


@pytest.mark.parametrize("down", DOWNSTREAM)
async def test_a_client_that_declared_no_elicitation_is_not_asked_and_the_server_hears_why(
    down: ProtocolMode,
) -> None:
    answers = ClientAnswers()
    seen = await observed("legacy", down, answers, sampling_callback=answers.sample)
    assert "elicitation/create refused" in seen
    assert "whose MCP client declared no elicitation" in seen
    assert answers.elicited == []


async def test_a_2026_client_is_not_asked_mid_call_and_the_server_hears_why() -> None:
    answers = ClientAnswers()
    seen = await observed("auto", "legacy", answers, **answers.callbacks())
    assert "elicitation/create refused" in seen
    assert "speaks 2026-07-28" in seen
    assert answers.elicited == []
