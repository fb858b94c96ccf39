"""Loop protection across processes: every MCP call carries a hop count in `_meta`."""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, DepthExceeded, Gateway
from gateway.run_context import HOPS_META_KEY
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import FunctionToolkit, McpServerConfig, McpToolkit, calculator

pytestmark = pytest.mark.anyio


def toy_with_meta_probe(seen: list[Any]) -> ToyServer:
    toy = ToyServer("downstream")

    async def probe(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        seen.append(dict(ctx.meta or {}))
        return text_result("probed")

    toy.add("probe", probe)
    return toy


@pytest.mark.parametrize(("hops", "expected"), [(0, 1), (2, 3)])
async def test_calls_to_mcp_servers_carry_one_more_hop(hops: int, expected: int) -> None:
    seen: list[Any] = []
    toy = toy_with_meta_probe(seen)
    config = McpServerConfig(command="unused", prefix="never")
    async with McpToolkit("downstream", config, target=toy.server) as node:
        model = ScriptedModel([ScriptedAnswer(tool_calls=[ScriptedCall(name="probe")]), "done"])
        gateway = Gateway([node], [AgentSpec("a", model, tools=["downstream"])], max_depth=5)
        result = await gateway.run("a", "go", hops=hops)
    assert result.output == "done"
    assert seen[0][HOPS_META_KEY] == expected


async def test_a_run_arriving_at_the_depth_limit_is_refused() -> None:
    gateway = Gateway([], [AgentSpec("a", ScriptedModel(["never"]))], max_depth=3)
    with pytest.raises(DepthExceeded, match="passed through 3 gateways"):
        await gateway.run("a", "go", hops=3)


async def test_a_tool_call_arriving_at_the_depth_limit_is_refused() -> None:
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], max_depth=2)
    assert (await gateway.call_tool("calculator", {"expression": "1"}, hops=1)).is_error is False
    with pytest.raises(DepthExceeded, match="passed through 2 gateways"):
        await gateway.call_tool("calculator", {"expression": "1"}, hops=2)
