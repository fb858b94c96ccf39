"""The handshake's `instructions` say what this gateway serves: how to call an agent (every
argument its schema takes), and other tools only where some are served."""

from __future__ import annotations

import pytest
from mcp import Client

from gateway.server.served.instructions import AGENTS, EXPOSED

from .support import ERAS, calculator_agent, calculator_gateway, serve

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("expose_tools", [False, True])
async def test_the_instructions_tell_of_the_tools_that_are_served(
    era: str, expose_tools: bool
) -> None:
    gateway = calculator_gateway(calculator_agent([]))
    async with Client(serve(gateway, expose_tools=expose_tools), mode=era) as client:
        said = client.instructions
        listing = await client.list_tools()
    names = {tool.name for tool in listing.tools}
    assert said is not None
    assert said == (f"{AGENTS} {EXPOSED}" if expose_tools else AGENTS)
    # No other tool is spoken of unless one is served (a model reads these words).
    assert ("other tools" in said) == (names != {"assistant"})
    agent = next(tool for tool in listing.tools if tool.name == "assistant")
    for argument in agent.input_schema["properties"]:
        assert f"`{argument}`" in said
