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
