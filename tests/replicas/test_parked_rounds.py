"""A proxied call whose server asks the client mid-call, through two replicas behind a real
nginx (round robin), with a 2026-07-28 SDK client: the call stays parked on the replica that
runs it, and a round that reaches the other replica is sent on to it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.server.proxying import ClientAnswers
from tests.servers.databases import free_port
from toolkits import result_text

from .cluster import cluster, config

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(120)]

ASKING = Path(__file__).parents[1] / "servers" / "asking.py"


async def test_rounds_of_a_parked_call_reach_its_replica_through_either(tmp_path: Path) -> None:
    port = free_port()
    body = f'[mcpServers.asking]\ncommand = "{sys.executable}"\nargs = ["{ASKING}"]\n'
    path = config(tmp_path, port, body, gateway="expose_tools = true")
    answers = ClientAnswers()
    async with (
        cluster(path, port) as gateways,
        gateways.http() as http,
        Client(
            streamable_http_client(gateways.url, http_client=http), **answers.callbacks()
        ) as client,
    ):
        result = await client.call_tool("asking__ask", {"question": "six times seven?"})
        rounds = gateways.answered("tools/call")
        sent_on = [r for r in gateways.replicas if any("is sent on there" in x for x in r.lines)]
    assert not result.is_error, result.content
    assert result_text(result) == "model said '42'; user is Ada"
    assert len(rounds) == 3  # the call, the answer to sampling, the answer to elicitation
    assert set(rounds) == {r.address for r in gateways.replicas}  # round robin: both took some
    # The replica that did not run the call sent its round(s) on to the one that did.
    [forwarder] = sent_on
    owner = rounds[0]
    assert forwarder.address != owner
    assert len(answers.sampled) == 1
    assert len(answers.elicited) == 1
