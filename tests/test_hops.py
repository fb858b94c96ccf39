"""Loop protection across processes: every MCP call carries a hop count in `_meta`, every
model request the same as a header (a model may be a gateway's `/v1`)."""

from __future__ import annotations

from typing import Any

import httpx
import mcp_types as types
import pytest

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from agent.models import OpenAICompatibleModel
from gateway import AgentSpec, DepthExceeded, Gateway
from gateway.run_context import HOPS_HEADER, HOPS_META_KEY
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


ARRIVES = (
    "refused: the request arrives {hops} levels deep, the depth limit ({hops}, max_depth), "
    "counting each agent on the calling gateways that led here and each gateway that relayed "
    "it (gateways calling each other in a loop end here)"
)


async def test_a_run_arriving_at_the_depth_limit_is_refused_saying_what_was_counted() -> None:
    gateway = Gateway([], [AgentSpec("a", ScriptedModel(["never"]))], max_depth=3)
    with pytest.raises(DepthExceeded) as refused:
        await gateway.run("a", "go", hops=3)
    assert str(refused.value) == ARRIVES.format(hops=3)  # not "3 gateways": agents count too


async def test_a_tool_call_arriving_at_the_depth_limit_is_refused() -> None:
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], max_depth=2)
    assert (await gateway.call_tool("calculator", {"expression": "1"}, hops=1)).is_error is False
    with pytest.raises(DepthExceeded) as refused:
        await gateway.call_tool("calculator", {"expression": "1"}, hops=2)
    assert str(refused.value) == ARRIVES.format(hops=2)


async def test_a_sub_agent_past_the_limit_is_refused_counting_the_levels_before_us() -> None:
    """A request that came 2 levels deep (a calling gateway's agents) leaves room for two
    levels here: `a`, then `b`; `c` is refused, the message counting both."""
    model = ScriptedModel(
        [
            ScriptedAnswer(tool_calls=[ScriptedCall(name="b", arguments={"prompt": "go"})]),
            ScriptedAnswer(tool_calls=[ScriptedCall(name="c", arguments={"prompt": "go"})]),
            "b: c was refused",
            "a: done",
        ]
    )
    agents = [AgentSpec("a", model, tools=["b"]), AgentSpec("b", model, tools=["c"])]
    gateway = Gateway([], [*agents, AgentSpec("c", model)], max_depth=4)
    result = await gateway.run("a", "go", hops=2)
    assert result.output == "a: done"
    [refused] = [m.content for m in model.calls[2][0] if isinstance(m, ToolMessage)]
    assert refused == (
        "Error: agent depth limit (4, max_depth) reached: a -> b -> c would be 5 levels deep: "
        "3 agents here, after 2 before this gateway (each agent on the calling gateways that "
        "led here, and each gateway that relayed the request)"
    )


def openai_answer(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    }


async def test_model_requests_carry_the_runs_depth_as_a_header() -> None:
    """A model may be another gateway's `/v1` (or this one's): each request says how deep the
    run is there, as an MCP call's `_meta` does; a sub-agent's one more."""
    asks_b = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "b", "arguments": '{"prompt": "go"}'},
            }
        ],
    }
    answers = [asks_b, {"role": "assistant", "content": "b: done"}]
    answers.append({"role": "assistant", "content": "a: done"})
    sent: list[str | None] = []

    def provider(request: httpx.Request) -> httpx.Response:
        if request.method != "POST":  # the lookup of the model's context window
            return httpx.Response(404)
        sent.append(request.headers.get(HOPS_HEADER))
        return httpx.Response(200, json=openai_answer(answers.pop(0)))

    async with httpx.AsyncClient(transport=httpx.MockTransport(provider)) as http:
        model = OpenAICompatibleModel("http://models.test/v1", "m", http_client=http)
        agents = [AgentSpec("a", model, tools=["b"]), AgentSpec("b", model)]
        result = await Gateway([], agents, max_depth=5).run("a", "go", hops=2)
    assert result.output == "a: done"
    assert sent == ["3", "4", "3"]  # a (2 + 1), b under it, a again
