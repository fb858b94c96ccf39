"""A 2026-07-28 round of a proxied call parked on another replica, in-process: two gateways on
one state key (no store, no load balancer), the client's retry sent to the one that does not
run the call. What the client and the operator are told when that cannot work: the replica
that runs it is gone, or the replicas' state keys differ."""

from __future__ import annotations

import logging
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
from mcp.shared.exceptions import MCPError
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
async def replica(key_env: str | None) -> AsyncGenerator[Server[Any]]:
    """A gateway exposing the asking server's tool, sealing rounds with the key in `key_env`
    (None: a key of its own)."""
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


ROUNDS_LOG = "gateway.server.client_requests.run_rounds"


async def refused(server: Server[Any], key: str, state: str, arguments: dict[str, Any]) -> str:
    """The round's retry sent to `server`, which refuses its state: the client's error."""
    async with Client(server, elicitation_callback=answer) as client:
        with pytest.raises(MCPError) as refusal:
            await client.session.call_tool(
                "d__ask",
                arguments,
                input_responses={key: types.ElicitResult(action="accept", content={"name": "Ada"})},
                request_state=state,
                allow_input_required=True,
            )
    return refusal.value.error.message


async def test_a_round_sealed_with_another_replicas_key_names_the_setting_to_mend(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A key roll-out half done: the operator's log says which setting differs, and how to
    change a key with no round refused; the client's error stays the SDK's."""
    monkeypatch.setenv("GW_STATE_KEY", KEY)
    monkeypatch.setenv("GW_OTHER_KEY", "o" * 40)
    with anyio.fail_after(60), caplog.at_level(logging.WARNING, logger=ROUNDS_LOG):
        async with (
            replica("GW_STATE_KEY") as sealing,
            replica("GW_OTHER_KEY") as other,
            replica(None) as own_key,
        ):
            key, state = await parked_round(sealing)
            said = [await refused(other, key, state, {}), await refused(own_key, key, state, {})]
    assert said == ["Invalid or expired requestState"] * 2
    other_key, own = [r.getMessage() for r in caplog.records if r.name == ROUNDS_LOG]
    assert other_key.startswith(
        "a 2026-07-28 client's tools/call round was refused ('Invalid or expired "
        "requestState'): its requestState was sealed with a key that is not in GW_OTHER_KEY "
        "([gateway] state_key_env) here: another replica seals with another key."
    )
    assert "roll out OLD,NEW, then NEW,OLD, then NEW" in other_key
    assert "[gateway] state_key_env is not set, so each process seals with a key of its own" in own
    assert "the same key on every replica" in own
    # The run such a round was for has no end of its own: the operator is told how to find it.
    for line in (other_key, own):
        assert "stays waiting for its decisions" in line
        assert line.endswith(
            "`agent-gateway runs list --status waiting_approval` lists it, "
            "`runs approve|deny|cancel RUN` ends its wait"
        )
    assert KEY not in other_key + own  # the keys themselves are never shown


async def test_a_round_refused_for_another_reason_says_nothing_of_keys(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GW_STATE_KEY", KEY)
    with anyio.fail_after(60), caplog.at_level(logging.WARNING, logger=ROUNDS_LOG):
        async with replica("GW_STATE_KEY") as sealing, replica("GW_STATE_KEY") as other:
            key, state = await parked_round(sealing)
            # Its state is bound to the call's arguments: other ones are refused.
            said = await refused(other, key, state, {"more": 1})
    assert said == "Invalid or expired requestState"
    assert [r.getMessage() for r in caplog.records if r.name == ROUNDS_LOG] == []
