"""`/mcp/` is `/mcp`, and no path is answered with a redirect.

Behind a TLS proxy, or one serving the gateway under a sub-path (nginx `location /gw/ {
proxy_pass http://gateways/; }` hands `https://HOST/gw/mcp/` on as `/mcp/`), a redirect's
absolute Location was built from what the proxy hides: `http://HOST/mcp`, TLS and the prefix
lost, and given before the token was checked (QA round 8)."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.resource_server import ResourceServerSettings
from gateway.server import HttpOptions, http_app
from tests.server.support import ERAS, calculator_gateway, serve
from tests.servers.asgi import serve_on_loopback

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "paths-test-token-" + "x" * 16
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


class UnderPrefix:
    """What nginx's `location /gw/ { proxy_pass http://gateways/; }` does: `/gw/x` reaches the
    app as `/x`, and the app is told nothing of the prefix; anything else is not the app's."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
        elif scope["path"].startswith(self.prefix + "/"):
            path = scope["path"].removeprefix(self.prefix)
            await self.app({**scope, "path": path, "raw_path": path.encode()}, receive, send)
        else:
            await PlainTextResponse("not here", status_code=404)(scope, receive, send)


@asynccontextmanager
async def gateway() -> AsyncGenerator[str]:
    """A gateway with a token, serving the calculator under `/gw`; its base URL (no path)."""
    server = serve(calculator_gateway(), expose_tools=True)
    app = http_app(server, HttpOptions("127.0.0.1", 0, tokens=(TOKEN,)))
    async with serve_on_loopback(UnderPrefix(app, "/gw")) as base:
        yield base


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_at_mcp_with_a_trailing_slash_under_a_sub_path_is_served_there(
    era: str,
) -> None:
    async with gateway() as base:
        with anyio.fail_after(30):
            async with (
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as authorized,
                Client(
                    streamable_http_client(f"{base}/gw/mcp/", http_client=authorized), mode=era
                ) as client,
            ):
                assert client.protocol_version == (
                    "2025-11-25" if era == "legacy" else "2026-07-28"
                )
                listing = await client.list_tools()
                assert [t.name for t in listing.tools] == ["calculator"]
                answer = await client.call_tool("calculator", {"expression": "6 * 7"})
    assert answer.structured_content == {"response": "42"}
    assert not answer.is_error
    assert isinstance(answer.content[0], types.TextContent)


async def test_a_wrong_token_at_mcp_with_a_trailing_slash_is_refused_not_redirected() -> None:
    async with gateway() as base, httpx2.AsyncClient(follow_redirects=False) as http:
        with anyio.fail_after(30):
            refused = await http.post(
                f"{base}/gw/mcp/",
                json=LIST,
                headers={**MCP_HEADERS, "Authorization": "Bearer wrong-token-xxxxxxxxxxxx"},
            )
    assert refused.status_code == 401
    assert "location" not in refused.headers
    assert refused.headers["www-authenticate"].startswith("Bearer")


async def test_the_resource_metadata_with_a_trailing_slash_is_not_redirected() -> None:
    oauth = ResourceServerSettings(
        resource="https://gw.example.com/mcp",
        authorization_servers=["https://issuer.example.com"],
        jwks_uri="https://issuer.example.com/jwks",
    )
    server = serve(calculator_gateway(), expose_tools=True)
    app = http_app(server, HttpOptions("127.0.0.1", 0, oauth=oauth))
    async with serve_on_loopback(app) as base, httpx2.AsyncClient(follow_redirects=False) as http:
        with anyio.fail_after(30):
            found = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp")
            slashed = await http.get(f"{base}/.well-known/oauth-protected-resource/mcp/")
    assert found.status_code == 200
    assert found.json()["resource"] == "https://gw.example.com/mcp"
    assert slashed.status_code == 404
    assert "location" not in slashed.headers
