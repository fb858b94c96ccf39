"""Proxied calls of 2026-07-28 clients that can be asked, passed straight through: asked in
input-required rounds as on the usual path.

The downstream server and the two gateways (pass-through on and off) of
`test_pass_through_sessions`; clients that declare sampling, elicitation or roots and speak
2026-07-28 to the gateway: the SDK's `Client`, and raw JSON-RPC over HTTP for what only the
wire shows (the rounds' questions and sealed state, a retry that does not fit its state). The
first round of every call passes through; a retry is the usual path's either way.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from gateway.server import HttpOptions
from tests.server.proxying import ClientAnswers
from toolkits import result_text
from toolkits.mcp.config import ProtocolMode

from .test_pass_through import NODE_PROTOCOLS, Downstream, Heard, two_modern_fronts
from .test_pass_through_sessions import (
    ASKED,
    ASKING_TOOLS,
    asked_on_both_paths,
    both_fronts,
    check_asked,
    check_not_asked,
    messages,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
MODERN = "2026-07-28"


@NODE_PROTOCOLS
async def test_a_client_asked_in_rounds_is_asked_through_a_call_passed_through(
    protocol: ProtocolMode,
) -> None:
    """Mid-call questions (a handshake-era node) and input-required rounds (a 2026-07-28
    node's `greet`) alike reach the client in rounds, as on the usual path."""
    asked = await asked_on_both_paths(protocol, "auto", ASKED)
    check_asked(protocol, asked["fast"])


@NODE_PROTOCOLS
async def test_what_a_client_asked_in_rounds_did_not_declare_it_is_not_asked(
    protocol: ProtocolMode,
) -> None:
    tools = (*ASKING_TOOLS, "d__declared")
    asked = await asked_on_both_paths(protocol, "auto", tools, roots_only=True)
    check_not_asked(protocol, asked["fast"])


@NODE_PROTOCOLS
async def test_progress_and_log_messages_reach_a_client_asked_in_rounds_as_on_the_usual_path(
    protocol: ProtocolMode,
) -> None:
    heard: dict[str, tuple[str, Any, list[str]]] = {}
    with anyio.fail_after(60):
        async with both_fronts(protocol=protocol) as (_, fast, usual, layer):
            for url in (fast, usual):
                logs, progress = Heard(), Heard()
                async with Client(
                    url,
                    logging_callback=logs.on_log,
                    log_level="info",
                    **ClientAnswers().callbacks(),
                ) as client:
                    await client.list_tools()
                    result = await client.call_tool(
                        "d__steps", {"n": 3}, progress_callback=progress.on_progress
                    )
                heard[url] = (result_text(result), progress.progress, logs.logs)
    assert layer.forwarded == 1
    assert heard[fast] == heard[usual]
    text, steps, logged = heard[fast]
    assert text == "3 steps"
    assert steps == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert len(logged) == 3


class ModernClient:
    """2026-07-28 requests as raw JSON-RPC over HTTP, from a client declaring elicitation."""

    def __init__(self, http: httpx2.AsyncClient, url: str, token: str = "") -> None:
        self.http = http
        self.url = url
        self.token = token
        self._ids = 0

    async def call(self, name: str, arguments: JsonObject, **params: Any) -> JsonObject:
        """The answer to a `tools/call` (its last message)."""
        self._ids += 1
        meta: JsonObject = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        }
        body: JsonObject = {
            "jsonrpc": "2.0",
            "id": self._ids,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments, "_meta": meta, **params},
        }
        headers = {
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": MODERN,
            "mcp-method": "tools/call",
            "mcp-name": name,
        }
        if self.token:
            headers["authorization"] = f"Bearer {self.token}"
        response = await self.http.post(self.url, json=body, headers=headers)
        return messages(response.headers["content-type"], response.content)[-1]


@NODE_PROTOCOLS
async def test_the_rounds_on_the_wire_are_the_usual_paths_and_their_state_is_sealed(
    protocol: ProtocolMode,
) -> None:
    accepted = {"action": "accept", "content": {"name": "Ada"}}
    rounds: dict[str, list[JsonObject]] = {}
    refused: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(60):
        async with (
            both_fronts(protocol=protocol) as (_, fast, usual, layer),
            httpx2.AsyncClient() as http,
        ):
            for url in (fast, usual):
                client = ModernClient(http, url)
                first = await client.call("d__greet", {})
                state = first["result"]["requestState"]
                [key] = first["result"]["inputRequests"]
                answer = {key: accepted}
                refused[url] = [
                    # Another tool, other arguments, a state altered: none fits the state.
                    await client.call("d__echo", {}, inputResponses=answer, requestState=state),
                    await client.call(
                        "d__greet", {"x": 1}, inputResponses=answer, requestState=state
                    ),
                    await client.call(
                        "d__greet", {}, inputResponses=answer, requestState=state[:-4] + "AAAA"
                    ),
                ]
                last = await client.call("d__greet", {}, inputResponses=answer, requestState=state)
                rounds[url] = [first, last]
    assert layer.forwarded == 1  # the first round: its retries are the usual path's
    for url in (fast, usual):
        first, last = rounds[url]
        assert first["result"]["resultType"] == "input_required"
        assert first["result"]["inputRequests"][key]["method"] == "elicitation/create"
        # Sealed: not the parked request's own name, which a client could otherwise forge.
        assert not first["result"]["requestState"].startswith("agent-gateway/parked:")
        assert last["result"]["content"] == [{"type": "text", "text": "hello Ada"}]
        for answer in refused[url]:
            assert answer["error"]["message"] == "Invalid or expired requestState"
    plain = [{k: v for k, v in r["result"].items() if k != "requestState"} for r in rounds[fast]]
    assert plain == [
        {k: v for k, v in r["result"].items() if k != "requestState"} for r in rounds[usual]
    ]


@NODE_PROTOCOLS
async def test_a_call_asked_in_rounds_that_the_client_abandons_is_cancelled_at_the_server(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with (
            both_fronts(protocol=protocol) as (down, fast, _usual, layer),
            Client(fast, **ClientAnswers().callbacks()) as client,
        ):
            await client.list_tools()
            async with anyio.create_task_group() as tg:
                tg.start_soon(partial(client.call_tool, "d__wait", {}))
                await down.started.wait()
                tg.cancel_scope.cancel()
            await down.cancelled.wait()
            # The connection and the gateway serve on.
            echoed = await client.call_tool("d__echo", {"message": "still here"})
    assert result_text(echoed) == "still here"
    assert layer.forwarded == 1  # the echo: a call its client abandoned is not answered


async def test_a_round_sealed_for_one_caller_is_refused_to_another_as_on_the_usual_path() -> None:
    """The state is bound to the caller's token (static tokens here) on both paths."""
    accepted = {"action": "accept", "content": {"name": "Ada"}}
    answers: dict[str, list[JsonObject]] = {}
    options = HttpOptions("127.0.0.1", 0, tokens=("alpha-token", "beta-token"))
    with anyio.fail_after(60):
        async with (
            both_fronts(options) as (_, fast, usual, layer),
            httpx2.AsyncClient() as http,
        ):
            for url in (fast, usual):
                alpha = ModernClient(http, url, "alpha-token")
                beta = ModernClient(http, url, "beta-token")
                first = await alpha.call("d__greet", {})
                state = first["result"]["requestState"]
                [key] = first["result"]["inputRequests"]
                retry = {"inputResponses": {key: accepted}, "requestState": state}
                answers[url] = [
                    await beta.call("d__greet", {}, **retry),
                    await alpha.call("d__greet", {}, **retry),
                ]
    assert layer.forwarded == 1
    for url in (fast, usual):
        stolen, own = answers[url]
        assert stolen["error"]["message"] == "Invalid or expired requestState"
        assert own["result"]["content"] == [{"type": "text", "text": "hello Ada"}]


async def test_a_client_asked_in_rounds_through_two_modern_fronts_passes_through_both() -> None:
    """The outer front's node declares with the call what the client answers, so the inner
    front passes it through too and parks it; its rounds reach the client through the
    outer front's, and each retry goes back the same way."""
    down = Downstream()
    answers = ClientAnswers()
    with anyio.fail_after(60):
        async with (
            two_modern_fronts(down) as (outer_url, inner, outer),
            Client(outer_url, **answers.callbacks()) as client,
        ):
            await client.list_tools()
            greeted = await client.call_tool("d__d__greet", {})
            declared = await client.call_tool("d__d__declared", {})
    assert result_text(greeted) == "hello Ada"
    assert result_text(declared) == "sampling,elicitation,roots"
    assert [params.message for params in answers.elicited] == ["Your name?"]
    assert outer is not None
    assert inner is not None
    assert (outer.forwarded, inner.forwarded) == (2, 2)
