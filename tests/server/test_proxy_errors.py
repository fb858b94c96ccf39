"""A downstream server's JSON-RPC error to a proxied tool call reaches the client as that
error (code, message, `data`), passed through or not, over HTTP and stdio fronts, in both
client eras and both node eras; -32042 (a URL to open first), which 2026-07-28 retired, comes
to such a client as the error result naming the URL. An agent's own call (the node's) reads
it as an error result, its text for the model."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import mcp_types as types
import pytest
from mcp import Client, UrlElicitationRequiredError
from mcp.server import MCPServer
from mcp.shared.exceptions import MCPError

from tests.servers.asgi import serve_on_loopback
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit, protocol_error
from toolkits.mcp.config import ProtocolMode

from .proxying import ClientAnswers, gateway_front
from .stdio_fronts import stdio_front

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

URL = "https://example.com/connect"
CALLS = ["d__refuse", "d__needs_url", "d__fine"]


def downstream() -> MCPServer:
    server = MCPServer("down")

    @server.tool()
    def refuse() -> str:  # pyright: ignore[reportUnusedFunction]
        """Fail with a JSON-RPC error of its own."""
        raise MCPError(-32099, "custom rpc failure", data={"why": "because"})

    @server.tool()
    def needs_url() -> str:  # pyright: ignore[reportUnusedFunction]
        """Want a URL opened first (-32042)."""
        asked = types.ElicitRequestURLParams(message="Connect it", url=URL, elicitation_id="e1")
        raise UrlElicitationRequiredError([asked])

    @server.tool()
    def fine() -> str:  # pyright: ignore[reportUnusedFunction]
        """Answer."""
        return "fine"

    return server


Front = Literal["http", "stdio"]
Era = Literal["auto", "legacy"]


@asynccontextmanager
async def front_client(
    url: str, front: Front, era: Era, *, pass_through: bool, protocol: ProtocolMode, asks: bool
) -> AsyncGenerator[tuple[Client, Callable[[], int]]]:
    """A client of a gateway in front of `url`; how many calls the gateway passed through."""
    config = McpServerConfig(url=url, protocol=protocol)
    keys: dict[str, Any] = ClientAnswers().callbacks() if asks else {}
    if front == "http":
        async with (
            gateway_front(config, pass_through=pass_through) as (front_url, layer, _),
            Client(front_url, mode=era, **keys) as client,
        ):
            yield client, lambda: layer.forwarded if layer is not None else 0
    else:
        async with (
            stdio_front(config, pass_through=pass_through) as stdio,
            Client(stdio.client(), mode=era, **keys) as client,
        ):
            yield client, lambda: stdio.forwarded


async def _outcomes(client: Client) -> list[tuple[Any, ...]]:
    await client.list_tools()  # as clients do; a call before any listing takes the usual path
    outcomes: list[tuple[Any, ...]] = []
    for name in CALLS:
        try:
            result = await client.call_tool(name, {})
        except MCPError as exc:
            outcomes.append(("error", exc.error.code, exc.error.message, exc.error.data))
        else:
            outcomes.append(("result", result.is_error, result_text(result)))
    return outcomes


@pytest.mark.parametrize("protocol", ["auto", "modern"])
@pytest.mark.parametrize("front", ["http", "stdio"])
async def test_a_downstream_json_rpc_error_reaches_the_client_as_that_error(
    protocol: ProtocolMode, front: Front
) -> None:
    with anyio.fail_after(90):
        async with serve_on_loopback(downstream().streamable_http_app(host="127.0.0.1")) as base:
            url = f"{base}/mcp"
            seen: dict[tuple[Era, bool, bool], list[tuple[Any, ...]]] = {}
            for era in ("legacy", "auto"):
                for asks in (False, True):
                    for passing in (True, False):
                        async with front_client(
                            url, front, era, pass_through=passing, protocol=protocol, asks=asks
                        ) as (client, forwarded):
                            seen[era, asks, passing] = await _outcomes(client)
                            assert forwarded() == (len(CALLS) if passing else 0)
    refused = ("error", -32099, "custom rpc failure", {"why": "because"})
    fine = ("result", False, "fine")
    for (era, asks, passing), outcomes in seen.items():
        assert outcomes == seen[era, asks, not passing], (era, asks)
        assert outcomes[0] == refused, (era, asks, passing)
        assert outcomes[2] == fine
    url_data = {
        "elicitations": [
            {"mode": "url", "message": "Connect it", "url": URL, "elicitationId": "e1"}
        ]
    }
    for asks in (False, True):
        # The handshake era's client gets the -32042 to run the URL flow with...
        legacy = seen["legacy", asks, True][1]
        assert legacy == ("error", -32042, "URL elicitation required", url_data)
        # ... a 2026-07-28 client, whose era has no such error, the URL in the error result.
        modern = seen["auto", asks, True][1]
        text = f"MCP error -32042: URL elicitation required; open {URL} (Connect it)"
        assert modern == ("result", True, text)


@pytest.mark.parametrize("raw", [True, False])
async def test_an_agents_call_reads_the_error_as_an_error_result(raw: bool) -> None:
    with anyio.fail_after(30):
        async with (
            serve_on_loopback(downstream().streamable_http_app(host="127.0.0.1")) as base,
            McpToolkit("d", McpServerConfig(url=f"{base}/mcp")) as node,
        ):
            node.raw_calls = raw
            result = await node.call_tool("d__refuse", {})
    assert result.is_error
    assert result_text(result) == "MCP error -32099: custom rpc failure"
    error = protocol_error(result)
    assert error is not None
    assert (error.code, error.data) == (-32099, {"why": "because"})
