"""The toolkits and the engine under trio: anyio lets an embedding program pick its event
loop, and the fast paths that ask asyncio's loop directly fall back to anyio's own."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import AgentSpec, Gateway
from toolkits import McpServerConfig, McpToolkitGroup, result_text

pytestmark = pytest.mark.anyio

PIPED = Path(__file__).parents[1] / "servers" / "piped.py"


@pytest.fixture
def anyio_backend() -> str:
    return "trio"


async def test_an_mcp_server_over_stdio_answers_calls_and_an_agent_under_trio() -> None:
    config = McpServerConfig(command=sys.executable, args=[str(PIPED)], timeout=20)
    with anyio.fail_after(60):
        async with McpToolkitGroup({"piped": config}) as group:
            node = group["piped"]
            echoed = await node.call_tool("piped__echo", {"message": "on trio"})
            assert result_text(echoed) == "on trio"
            failed = await node.call_tool("piped__fail", {})
            assert failed.is_error

            script = [
                ScriptedAnswer(
                    tool_calls=[ScriptedCall(name="piped__echo", arguments={"message": "hi"})]
                ),
                ScriptedAnswer(content="done"),
            ]
            model = ScriptedModel(script)
            spec = AgentSpec(name="a", model=model, tools=["piped"])
            result = await Gateway(list(group), [spec]).run("a", "say hi")
    assert result.output == "done"
    messages, _ = model.calls[-1]
    assert isinstance(messages[-1], ToolMessage)
    assert messages[-1].content == '{"result":"hi"}'
