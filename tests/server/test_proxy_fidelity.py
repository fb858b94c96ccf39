"""Through the gateway a client sees what it would see connected to the server directly.

The server behind is a real stdio process written the usual way (it asks its client over the
request's back-channel during a call); the gateway runs with its defaults.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client

from gateway import Gateway
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

from .proxying import ClientAnswers
from .support import ERAS, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ASKING = Path(__file__).parents[1] / "servers" / "asking.py"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_that_asks_its_client_works_through_the_gateway(era: str) -> None:
    node = McpToolkit("asking", McpServerConfig(command=sys.executable, args=[str(ASKING)]))
    answers = ClientAnswers()
    with anyio.fail_after(30):
        async with (
            node,
            Client(
                serve(Gateway([node], []), expose_tools=True), mode=era, **answers.callbacks()
            ) as client,
        ):
            result = await client.call_tool("asking__ask", {"question": "six times seven?"})
    assert not result.is_error, result_text(result)
    assert result_text(result) == "model said '42'; user is Ada"
    assert len(answers.sampled) == 1
    assert len(answers.elicited) == 1
