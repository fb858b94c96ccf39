"""Results real servers send that SDK servers would not, as a node returns them.

A real subprocess server (`tests/servers/odd_stdio.py`), called both ways a node calls: as raw
JSON-RPC on its pipe, and through the SDK client.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest

from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.observation import result_data, result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ODD = Path(__file__).parents[1] / "servers" / "odd_stdio.py"
BOTH_WAYS = pytest.mark.parametrize("raw_calls", [True, False], ids=["raw", "sdk"])


def odd(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[str(ODD)], prefix="never", **keys)


@BOTH_WAYS
async def test_a_result_that_breaks_its_output_schema_is_the_servers(raw_calls: bool) -> None:
    with anyio.fail_after(30):
        async with McpToolkit("odd", odd()) as node:
            node.raw_calls = raw_calls
            missing = await node.call_tool("weather", {})
            bad = await node.call_tool("weather_bad", {})
    # Not "Tool weather has an output schema but did not return structured content".
    assert not missing.is_error
    assert result_text(missing) == "21.5 degrees"
    assert result_data(missing) == {"response": "21.5 degrees"}
    assert not bad.is_error
    assert bad.structured_content == {"temp": "warm"}
    assert bad.content == [types.TextContent(text="warm")]


@BOTH_WAYS
@pytest.mark.parametrize("depth", [300, 5000])
async def test_an_answer_too_deep_to_read_is_that_calls_error_and_the_session_stays(
    raw_calls: bool, depth: int
) -> None:
    with anyio.fail_after(30):
        async with McpToolkit("odd", odd()) as node:
            node.raw_calls = raw_calls
            await node.list_tools()
            before = node.health
            deep = await node.call_tool("deep", {"depth": depth})
            echo = await node.call_tool("echo", {"after": "deep"})
            after = node.health
    assert deep.is_error
    assert result_text(deep) == (
        f"MCP server 'odd' sent a result nested too deeply ({depth} levels; at most 100)"
    )
    assert result_text(echo) == 'echo: {"after": "deep"}'
    # The same connection: no reconnect, nothing said gone.
    assert (after.state, after.since, after.last_error) == ("ready", before.since, None)
