"""A listing larger than the SDK client's 1 MB cap on one server-sent event reaches the SDK's
own `Client` whole, in both eras: the first listing, the one after a tools change (each a
miss of `served.tool_list_cache`), one answered from the cache, and behind OAuth (no cache).
The same over stdio: `test_stdio_large_listing`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from gateway import Gateway
from gateway.resource_server import ResourceServerSettings
from gateway.server import HttpOptions, http_app
from gateway.server.transports.stdio import MAX_MESSAGE_BYTES
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from tests.servers.oauth import AuthorityOptions, serve_authority
from tests.servers.wide import many_tools
from toolkits.mcp import McpServerConfig, McpToolkit
from toolkits.mcp.oauth_callback import free_loopback_port

from .processes import REPO, SCRIPT
from .proxying import Heard, listening
from .support import ERAS, serve

# Each takes 10 to 40 s alone on a loaded host (60 to 75 s beside others, as under CI's -n 3);
# their own fail_after(120) says where it stuck first.
pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

MANY = 2_000
"""About 1.3 MB listed: over the SDK client's cap on one event, little more (2,500 tools made
every listing a quarter dearer)."""
OVER_FOUR_MB_OF_TOOLS = 7_200
"""About 4.6 MB listed: over what the stdio front reads in one line (10,200 took 40 % longer)."""
WIDE = Path(__file__).parents[1] / "servers" / "wide.py"
SSE_EVENT_CAP = 1 << 20
"""What the SDK's client takes in one server-sent event (httpx2's `max_event_size`)."""
SDK_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
"""The SDK's own client's: httpx2's default (5 s to read) ended a quiet listen stream on a
loaded host before the change it waits for came ("ended without the server's graceful
close")."""


def _listing_bytes(tools: list[types.Tool]) -> int:
    listing = types.ListToolsResult(tools=tools)
    return len(listing.model_dump_json(by_alias=True, exclude_none=True))


async def _listings(url: str, era: str, toy: ToyServer, node: McpToolkit, **http: Any) -> None:
    """Lists through the gateway at `url` as the SDK's client does: first, again (the cache's
    answer), after a change it heard of, and in a new session; checks each is whole."""
    heard = Heard()

    async with (
        httpx2.AsyncClient(timeout=SDK_TIMEOUT, **http) as own,
        Client(
            streamable_http_client(url, http_client=own),
            mode=era,
            cache=None,
            message_handler=heard.on_message,
        ) as client,
        listening(client, heard),
    ):
        first = (await client.list_tools()).tools
        again = (await client.list_tools()).tools
        toy.add_echo("added")
        await node.refresh_tools()
        await heard.more_than(0, "tools")
        changed = (await client.list_tools()).tools
    async with (
        httpx2.AsyncClient(timeout=SDK_TIMEOUT, **http) as own,
        Client(streamable_http_client(url, http_client=own), mode=era, cache=None) as other,
    ):
        other_listing = (await other.list_tools()).tools
    assert _listing_bytes(first) > 1.1 * SSE_EVENT_CAP
    assert len(first) == MANY
    assert again == first
    assert [tool.name for tool in changed] == [tool.name for tool in first] + ["w__added"]
    assert other_listing == changed


@pytest.mark.parametrize("era", ERAS)
async def test_a_listing_over_a_megabyte_reaches_the_sdk_client_over_http(era: str) -> None:
    toy = many_tools(MANY)
    with anyio.fail_after(120):
        async with McpToolkit(
            "w", McpServerConfig(command="in-process"), target=toy.server
        ) as node:
            app = http_app(
                serve(Gateway([node], []), expose_tools=True), HttpOptions("127.0.0.1", 0)
            )
            async with serve_on_loopback(app) as base:
                await _listings(f"{base}/mcp", era, toy, node)


@pytest.mark.parametrize("era", ERAS)
async def test_a_listing_over_a_megabyte_reaches_the_sdk_client_behind_oauth(era: str) -> None:
    """With OAuth, the listing has no cache in front of the SDK (it depends on the token)."""
    toy = many_tools(MANY)
    port = free_loopback_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with anyio.fail_after(120):
        async with (
            serve_authority(AuthorityOptions(scopes=["mcp"])) as (authority, _seen),
            McpToolkit("w", McpServerConfig(command="in-process"), target=toy.server) as node,
        ):
            oauth = ResourceServerSettings(
                resource=resource,
                authorization_servers=[authority.issuer],
                introspection_endpoint=f"{authority.issuer}/introspect",
                required_scopes=["mcp"],
            )
            server = serve(Gateway([node], []), expose_tools=True, oauth=oauth)
            app = http_app(server, HttpOptions("127.0.0.1", port, oauth=oauth))
            token = authority.issue("some-client", ["mcp"], resource).access_token
            async with serve_on_loopback(app, port=port):
                await _listings(
                    resource, era, toy, node, headers={"authorization": f"Bearer {token}"}
                )


@pytest.mark.parametrize("era", ERAS)
async def test_a_listing_over_four_megabytes_reaches_the_sdk_client_over_stdio(
    era: str, tmp_path: Path
) -> None:
    """stdio has no cap on a line written: `serve --stdio` in front of a real stdio server,
    listing more than the 4 MiB it reads in one line (`MAX_MESSAGE_BYTES`)."""
    config = tmp_path / "agent-gateway.toml"
    args = json.dumps([str(WIDE), str(OVER_FOUR_MB_OF_TOOLS)])
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.w]\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n"
    )
    params = StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--stdio", "--config", str(config)], cwd=REPO
    )
    with anyio.fail_after(120):
        async with Client(params, mode=era, cache=None) as client:
            tools = (await client.list_tools()).tools
    assert len(tools) == OVER_FOUR_MB_OF_TOOLS
    assert _listing_bytes(tools) > 1.05 * MAX_MESSAGE_BYTES
