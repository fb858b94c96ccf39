"""The OpenAI-compatible API at its limits, over real HTTP on 127.0.0.1: an answer cut at a
token limit is the text so far with `finish_reason: "length"` (not a failure), and a request
that came around a loop of gateways too many times is refused naming the limit.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from agent import ModelError, ScriptedAnswer, ScriptedCall, ScriptedModel
from agent.models.openai import OpenAICompatibleModel
from gateway import AgentSpec, Gateway
from gateway.run_context import HOPS_HEADER, HOPS_META_KEY
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import FunctionToolkit, McpServerConfig, McpToolkit, calculator

from .test_openai_api import QUESTION, error_of, post, served, served_with_store, sse_data

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CUT = "The answer is forty two, and the reason"


def cut_gateway() -> Gateway:
    """`cut` writes until its model's `max_tokens`; `spender` asks for a tool with an answer
    that spends its `token_budget`, so the run stops before its answer."""
    cut = ScriptedModel([ScriptedAnswer(content=CUT, stop_reason="max_tokens")] * 2)
    asking = ScriptedAnswer(
        content="Let me compute.",
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "6 * 7"})],
    )
    spender = ScriptedModel([asking] * 2)
    agents = [
        AgentSpec("cut", cut),
        AgentSpec("spender", spender, tools=["calculator"], token_budget=3),
    ]
    return Gateway([FunctionToolkit("calculator", [calculator])], agents)


@pytest.mark.parametrize(("agent", "text"), [("cut", CUT), ("spender", "Let me compute.")])
async def test_an_answer_cut_at_a_token_limit_is_the_text_so_far_with_finish_reason_length(
    agent: str, text: str
) -> None:
    with anyio.fail_after(30):
        async with served(cut_gateway()) as base:
            whole = await post(base, {"model": agent, "messages": [QUESTION]})
            body = {"model": agent, "messages": [QUESTION], "stream": True}
            streamed = await post(base, {**body, "stream_options": {"include_usage": True}})
    assert whole.status_code == 200, whole.text
    choice = whole.json()["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == text
    assert whole.json()["usage"]["completion_tokens"] > 0
    assert streamed.status_code == 200
    *events, done = sse_data(streamed.text)
    assert done == "[DONE]"
    *chunks, usage = [json.loads(e) for e in events]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == text
    assert [c["choices"][0]["finish_reason"] for c in chunks][-2:] == [None, "length"]
    assert usage["usage"]["completion_tokens"] > 0


async def test_a_stored_runs_cut_answer_is_the_text_so_far_too(tmp_path: Path) -> None:
    filtered = ScriptedModel([ScriptedAnswer(content="", stop_reason="content_filter")])
    gateway = cut_gateway()
    gateway.agents["filtered"] = AgentSpec("filtered", filtered)
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, _, _):
            body = {"model": "cut", "messages": [QUESTION], "stream": True}
            streamed = await post(base, body)
            failed = await post(base, {"model": "filtered", "messages": [QUESTION]})
    *events, done = sse_data(streamed.text)
    assert done == "[DONE]"
    chunks = [json.loads(e) for e in events]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == CUT
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    # Another answer that stopped short (a content filter) is no text to give: a failure.
    assert failed.status_code == 500
    assert "content filter" in error_of(failed)["message"]


def probed_gateway(seen: list[Any]) -> tuple[Gateway, McpToolkit]:
    toy = ToyServer("downstream")

    async def probe(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        seen.append(dict(ctx.meta or {}))
        return text_result("probed")

    toy.add("probe", probe)
    node = McpToolkit(
        "downstream", McpServerConfig(command="unused", prefix="never"), target=toy.server
    )
    model = ScriptedModel([ScriptedAnswer(tool_calls=[ScriptedCall(name="probe")]), "done"] * 2)
    spec = AgentSpec("probing", model, tools=["downstream"])
    return Gateway([node], [spec], max_depth=4), node


async def test_a_request_arriving_at_the_depth_limit_is_refused_naming_it() -> None:
    """A request's hops (`x-agent-gateway-hops`, sent by a calling gateway's agent) go on in
    the MCP calls of its run; at the limit, or unreadable, the request is refused."""
    seen: list[Any] = []
    gateway, node = probed_gateway(seen)
    body = {"model": "probing", "messages": [QUESTION]}
    with anyio.fail_after(30):
        async with node, served(gateway) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/chat/completions"
            deep = await http.post(url, json=body, headers={HOPS_HEADER: "2"})
            refused = await http.post(url, json=body, headers={HOPS_HEADER: "4"})
            unread = await http.post(url, json=body, headers={HOPS_HEADER: "-1"})
            # Digits to `isdigit`, not to `int`; a count no `int` reads.
            odd = [b"\xb2", b"9" * 5000]
            hops = HOPS_HEADER.encode()
            others = [await http.post(url, json=body, headers=[(hops, h)]) for h in odd]
    assert deep.json()["choices"][0]["message"]["content"] == "done"
    assert [meta[HOPS_META_KEY] for meta in seen] == [3]  # 2, and its agent
    assert refused.status_code == 400
    error = error_of(refused)
    assert error["code"] == "max_depth"
    assert error["message"] == (
        "refused: the request arrives 4 levels deep, the depth limit (4, max_depth), counting "
        "each agent on the calling gateways that led here and each gateway that relayed it "
        "(gateways calling each other in a loop end here) (x-agent-gateway-hops: 4)"
    )
    assert unread.status_code == 400
    assert "x-agent-gateway-hops header is not a count of hops: '-1'" in error_of(unread)["message"]
    for other in others:
        assert other.status_code == 400
        assert "x-agent-gateway-hops header is not a count of hops" in error_of(other)["message"]
    assert len(seen) == 1  # neither refused request ran


async def test_an_agent_whose_model_is_its_own_gateways_api_ends_at_the_depth_limit() -> None:
    """`model = "openai-compatible:http://<itself>/v1#loop"`: each request's run sends its depth
    to the next, and the one at the limit is refused, which fails each run on the way back."""
    gateway = Gateway([], [], max_depth=3)
    arrived: list[str | None] = []

    async def counting(request: httpx.Request) -> None:
        if request.method == "POST":  # not the lookup of its context window
            arrived.append(request.headers.get(HOPS_HEADER))

    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient(timeout=30) as http:
            own = OpenAICompatibleModel(base, "loop", http_client=http)
            gateway.agents["loop"] = AgentSpec("loop", own)
            async with httpx.AsyncClient(
                timeout=30, event_hooks={"request": [counting]}
            ) as counted:
                looped = OpenAICompatibleModel(base, "loop", http_client=counted)
                with pytest.raises(ModelError) as failed:
                    await Gateway([], [AgentSpec("front", looped)], max_depth=3).run("front", "?")
    said = str(failed.value)
    assert "HTTP 500" in said
    assert "the request arrives 3 levels deep, the depth limit (3, max_depth)" in said
    assert arrived == ["1"]  # the front gateway's agent: one level
