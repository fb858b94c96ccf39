"""A served gateway whose downstream server asks for authorisation during a proxied call puts
the authorisation page to its own MCP client (URL-mode elicitation: asked at once of a
2025-11-25 client, in an `input_required` round of a 2026-07-28 one), keeps the tokens for
itself, and the call goes on. Everything over real HTTP on 127.0.0.1: the authorization server,
the protected MCP server, the gateway, and an SDK client that opens the page by fetching it."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, urlsplit

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from gateway.assembly import open_gateway
from gateway.config import parse_config
from gateway.server import build_server, http_app, http_options
from tests.servers.asgi import serve_on_loopback
from tests.servers.oauth import AuthorityOptions, OAuthWorld, oauth_world
from toolkits.mcp import McpServerConfig
from toolkits.mcp.authorization import login
from toolkits.mcp.oauth_store import FileStore, ServerTokens

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

Answer = Literal["open", "decline"]


@pytest.fixture(autouse=True)
def token_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "oauth"
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "file")
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", str(store))
    monkeypatch.delenv("AGENT_GATEWAY_OAUTH_REDIRECT", raising=False)  # as `serve` runs
    return store


@asynccontextmanager
async def served_gateway(world: OAuthWorld) -> AsyncGenerator[str]:
    # Authorised once, with the scope the server asks for first ("read").
    await login("remote", McpServerConfig(url=world.url), mode="fetch")
    config = parse_config(
        {"gateway": {"expose_tools": True}, "mcpServers": {"remote": {"url": world.url}}}
    )
    async with open_gateway(config) as gateway:
        server, _router = build_server(gateway, config.gateway)
        app = http_app(server, http_options("127.0.0.1:0", config.gateway))
        async with serve_on_loopback(app) as base:
            yield f"{base}/mcp"


class Person:
    """The client's side: shown the page, opens it (the test server approves at once)."""

    def __init__(self, answer: Answer = "open") -> None:
        self.answer = answer
        self.asked: list[types.ElicitRequestURLParams] = []

    async def __call__(
        self, _ctx: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestURLParams)
        self.asked.append(params)
        if self.answer == "decline":
            return types.ElicitResult(action="decline")
        async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as http:
            page = await http.get(params.url)
        assert (page.status_code, page.url.path) == (200, "/callback"), page.text
        return types.ElicitResult(action="accept")


ERAS = {"legacy": "2025-11-25", "auto": "2026-07-28"}
"""How the client asks: a handshake-era client is sent the request at once; a 2026-07-28 one
gets it in an `input_required` round and calls again with the answer."""


async def call(url: str, era: str, tool: str, person: Person | None) -> types.CallToolResult:
    options: dict[str, Any] = {} if person is None else {"elicitation_callback": person}
    async with Client(url, mode=era, **options) as client:
        assert client.protocol_version == ERAS[era]
        return await client.call_tool(tool, {"text": "x"})


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_step_up_during_a_proxied_call_is_put_to_the_client_and_the_call_goes_on(
    era: str, token_dir: Path
) -> None:
    person = Person()
    async with oauth_world() as world, served_gateway(world) as url:
        result = await call(url, era, "remote__write", person)
        assert not result.is_error, result
        assert text(result) == "wrote:x"
        [asked] = person.asked
        assert "'remote' for more access (scopes: read write)" in asked.message
        query = parse_qs(urlsplit(asked.url).query)
        assert query["scope"] == ["read write"]
        assert query["resource"] == [world.url]
        # The new tokens are the gateway's: stored for its own use, never sent upstream.
        stored = await ServerTokens(FileStore(token_dir), "remote", world.url).load()
        assert stored.tokens is not None
        assert stored.tokens.scope == "read write"
        assert stored.tokens.access_token not in str(result.model_dump())
    assert [a.scopes for a in world.authority.authorizations] == [["read"], ["read", "write"]]


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_step_up_granted_in_part_fails_the_call_saying_what_was_granted(era: str) -> None:
    """The person approved, the authorization server granted less than the server needs: the
    call fails saying so (not a closed connection), and the other tools still answer."""
    person = Person()
    options = AuthorityOptions(withhold=frozenset({"write"}))
    async with oauth_world(options) as world, served_gateway(world) as url:
        refused = await call(url, era, "remote__write", person)
        assert refused.is_error
        assert text(refused) == (
            "tool 'remote__write' (node 'remote') failed: MCP server 'remote' refused the call: "
            "insufficient_scope (it needs `read write`; the authorization server granted `read`)"
        )
        assert len(person.asked) == 1
        assert not (await call(url, era, "remote__echo", None)).is_error


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_grant_revoked_mid_session_is_authorised_again_through_the_client(
    era: str,
) -> None:
    person = Person()
    async with oauth_world() as world, served_gateway(world) as url:
        assert text(await call(url, era, "remote__echo", None)) == "echo:x"
        world.authority.revoke_all()  # the refresh token dies too: a new authorization it is
        result = await call(url, era, "remote__echo", person)
        assert not result.is_error, result
        assert text(result) == "echo:x"
        assert len(person.asked) == 1
    assert world.authority.grants == ["authorization_code", "authorization_code"]


async def test_a_client_that_declines_or_cannot_open_pages_gets_the_login_command(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with oauth_world() as world, served_gateway(world) as url:
        person = Person("decline")
        declined = await call(url, "legacy", "remote__write", person)
        assert declined.is_error
        assert len(person.asked) == 1
        assert "agent-gateway auth login remote" in text(declined)
        assert text(declined) == (
            "tool 'remote__write' (node 'remote') failed: MCP server 'remote' needs "
            "authorisation, which its caller refused (decline): run `agent-gateway auth login "
            "remote`"
        )
        unable = await call(url, "legacy", "remote__write", None)  # no elicitation capability
        assert unable.is_error
        assert "the upstream client lacks elicitation" in text(unable)
        assert "run `agent-gateway auth login remote`" in text(unable)
        # The grant still serves the server's other tools, on the same connection.
        assert text(await call(url, "legacy", "remote__echo", None)) == "echo:x"
    assert len(world.authority.authorizations) == 1  # only the login
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_client_that_cannot_be_asked_hears_why_whichever_path_its_call_takes(
    era: str,
) -> None:
    # Its calls pass straight through (it cannot be asked): the step-up's refusal says why
    # nobody was asked, on whichever path the auth flow refused the call.
    async with oauth_world() as world, served_gateway(world) as url:
        assert text(await call(url, era, "remote__echo", None)) == "echo:x"
        unable = await call(url, era, "remote__write", None)
        assert unable.is_error
        assert text(unable) == (
            "tool 'remote__write' (node 'remote') failed: MCP server 'remote' needs "
            "authorisation, and its caller was not asked (elicitation/create refused: the "
            "upstream client lacks elicitation): run `agent-gateway auth login remote`"
        )
        assert text(await call(url, era, "remote__echo", None)) == "echo:x"
    assert len(world.authority.authorizations) == 1  # only the login
