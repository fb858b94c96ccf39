"""A 2026-07-28 round of a proxied call parked on another replica, in-process: two gateways on
one state key (no store, no load balancer), the client's retry sent to the one that does not
run the call. What the client and the operator are told when that cannot work."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.server import MCPServer, Server
from mcp.server.mcpserver import Context
from pydantic import BaseModel

from gateway import Gateway
from gateway.server.server import reachable_at
from tests.server.support import serve
from tests.servers.databases import free_port
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

KEY = "k" * 40


class Name(BaseModel):
    name: str


def asking_server() -> MCPServer:
    server = MCPServer("asking")

    @server.tool()
    async def ask(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Ask the user for a name, mid-call."""
        answer = await ctx.elicit("Your name?", Name)
        return f"user is {answer.data.name}" if answer.action == "accept" else answer.action

    return server


@asynccontextmanager
async def replica(key_env: str) -> AsyncGenerator[Server[Any]]:
    """A gateway exposing the asking server's tool, sealing rounds with the key in `key_env`."""
    config = McpServerConfig(command="in-process")
    async with McpToolkit("d", config, target=asking_server()) as node:
        yield serve(Gateway([node], []), expose_tools=True, state_key_env=key_env)


async def answer(
    context: ClientRequestContext, params: types.ElicitRequestParams
) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"name": "Ada"})


async def parked_round(server: Server[Any]) -> tuple[str, str]:
    """A call of `d__ask` parked on `server`: its question's key and its sealed state."""
    async with Client(server, elicitation_callback=answer) as client:
        first = await client.session.call_tool("d__ask", {}, allow_input_required=True)
    assert isinstance(first, types.InputRequiredResult)
    assert first.input_requests is not None
    assert first.request_state is not None
    [key] = first.input_requests
    return key, first.request_state


async def retry(server: Server[Any], key: str, state: str) -> str:
    """The round's retry sent to `server`: the error its call ends with."""
    async with Client(server, elicitation_callback=answer) as client:
        result = await client.session.call_tool(
            "d__ask",
            {},
            input_responses={key: types.ElicitResult(action="accept", content={"name": "Ada"})},
            request_state=state,
            allow_input_required=True,
        )
    assert isinstance(result, types.CallToolResult)
    assert result.is_error
    return result_text(result)


async def test_a_round_whose_replica_is_gone_says_why_it_cannot_be_sent_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GW_STATE_KEY", KEY)
    gone = f"http://127.0.0.1:{free_port()}/mcp"  # nothing listens there: a replica killed
    with anyio.fail_after(60):
        async with replica("GW_STATE_KEY") as running, replica("GW_STATE_KEY") as other:
            reachable_at(running, gone)
            key, state = await parked_round(running)
            said = await retry(other, key, state)
    # The inner cause, not the task groups the SDK's client wraps it in.
    assert said == (
        f"the replica running this request ({gone}) cannot be reached (connection refused); "
        "send it again"
    )
