"""Toolkit nodes meeting servers that require MCP authorization, over real HTTP on 127.0.0.1:
discovery variants, registration variants, PKCE, `resource`, scopes, refresh, step-up."""

from __future__ import annotations

import base64
import logging
import os
import stat
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs

import anyio
import mcp_types as types
import pytest
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from pydantic import AnyUrl

from tests.servers.oauth import AuthorityOptions, OAuthWorld, legacy_world, oauth_world
from toolkits import AuthorizationRequired, ServerUnavailable
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit, transport
from toolkits.mcp.oauth import STEP_UP_LIMIT
from toolkits.mcp.oauth_callback import free_loopback_port, redirect_uri
from toolkits.mcp.oauth_store import FileStore, ServerTokens

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FAST = Backoff(initial=0.05, maximum=0.2)


@pytest.fixture(autouse=True)
def token_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    store = tmp_path / "oauth"
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_STORE", "file")
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_DIR", str(store))
    monkeypatch.setenv("AGENT_GATEWAY_OAUTH_REDIRECT", "fetch")
    return store


def node(world: OAuthWorld, **config: Any) -> McpToolkit:
    return McpToolkit("remote", McpServerConfig(url=world.url, **config), backoff=FAST)


async def call(toolkit: McpToolkit, tool: str = "echo", text: str = "hi") -> str:
    result = await toolkit.call_tool(f"remote__{tool}", {"text": text})
    assert not result.is_error, result
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def form(body: bytes) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(body.decode()).items()}


async def test_a_server_answering_401_gets_discovery_registration_pkce_and_resource() -> None:
    async with oauth_world() as world, node(world) as toolkit:
        assert toolkit.health.state == "ready", toolkit.health
        assert await call(toolkit) == "echo:hi"
    authority = world.authority
    assert authority.registrations == 1
    [authorization] = authority.authorizations
    assert authorization.resource == world.url  # RFC 8707
    assert authorization.scopes == ["read"]  # from WWW-Authenticate
    assert authority.grants == ["authorization_code"]
    [authorize] = [r for r in world.authority_seen if r.path == "/authorize"]
    [token] = world.token_requests()
    assert form(token.body)["code_verifier"]  # PKCE: the token handler checked it
    assert form(token.body)["resource"] == world.url
    assert authorize.method == "GET"


async def test_the_resource_indicator_is_the_servers_uri_without_the_query_it_was_given(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """RFC 8707 §2, which the MCP spec's canonical server URI follows: no fragment, and no
    query. Without protected resource metadata to name the resource (a 2025-03-26 server,
    its authorization server at its own origin) the `resource` is the server's URL, sent
    where the request refused says a protocol that has it (2026-07-28 says it on every
    one): the authorization server is not sent the credential in the URL's query."""
    caplog.set_level(logging.DEBUG)
    async with legacy_world() as world:
        config = McpServerConfig(url=f"{world.url}?api_key=QKEY-not-for-the-authority")
        async with McpToolkit("remote", config.model_copy(update={"protocol": "modern"})) as node:
            assert await call(node) == "echo:hi"
    [authorization] = world.authority.authorizations
    assert authorization.resource == world.url
    [token] = world.token_requests()
    assert form(token.body)["resource"] == world.url
    said = [record.getMessage() for record in caplog.records]
    assert any("/.well-known/oauth-authorization-server" in line for line in said)
    assert not any("QKEY" in line for line in said)


@pytest.mark.parametrize(
    ("metadata_at", "expected"),
    [
        ("path", "/.well-known/oauth-protected-resource/mcp"),
        ("root", "/.well-known/oauth-protected-resource"),
        ("hint", "/meta/resource.json"),
    ],
)
async def test_protected_resource_metadata_is_found_where_the_server_publishes_it(
    metadata_at: Literal["path", "root", "hint"], expected: str
) -> None:
    # "root" without the header hint: the client falls back from the path-based URL.
    async with oauth_world(metadata_at=metadata_at, hint=metadata_at == "hint") as world:
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        found = [r.path for r in world.protected.seen if r.method == "GET" and r.path != "/mcp"]
        assert found[-1] == expected


@pytest.mark.parametrize(
    ("metadata", "issuer_path", "expected"),
    [
        ("oauth", "", "/.well-known/oauth-authorization-server"),
        ("oidc", "", "/.well-known/openid-configuration"),
        ("oauth", "/tenant", "/.well-known/oauth-authorization-server/tenant"),
        ("oidc", "/tenant", "/tenant/.well-known/openid-configuration"),
    ],
)
async def test_authorization_server_metadata_oauth_and_openid_at_root_and_path_issuers(
    metadata: Literal["oauth", "oidc"], issuer_path: str, expected: str
) -> None:
    options = AuthorityOptions(metadata=metadata, issuer_path=issuer_path)
    async with oauth_world(options) as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
    found = [r.path for r in world.authority_seen if r.method == "GET" and "well-known" in r.path]
    assert found[-1] == expected
    assert world.authority.grants == ["authorization_code"]


@pytest.mark.parametrize(
    ("challenge", "supported", "advertised", "expected"),
    [
        ("read", ["read", "write"], True, ["read"]),  # WWW-Authenticate first
        (None, ["write"], True, ["write"]),  # then the resource's scopes_supported
        (None, None, False, None),  # neither says: no scope parameter
    ],
)
async def test_scopes_come_from_the_challenge_then_the_resource_metadata(
    challenge: str | None, supported: list[str] | None, advertised: bool, expected: list[str] | None
) -> None:
    options = AuthorityOptions(advertise_scopes=advertised)
    async with (
        oauth_world(options, challenge_scope=challenge, scopes_supported=supported) as world,
        node(world) as toolkit,
    ):
        assert await call(toolkit) == "echo:hi"
    assert world.authority.authorizations[0].scopes == expected


def basic_credentials(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    return base64.b64decode(value.removeprefix("Basic ")).decode() if value else None


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_a_pre_registered_client_authenticates_at_the_token_endpoint_as_configured(
    method: Literal["client_secret_basic", "client_secret_post", "none"],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PRE_SECRET", "s3cret-pre")
    port = free_loopback_port()
    secret = None if method == "none" else "s3cret-pre"
    async with oauth_world() as world:
        world.authority.add_client(
            OAuthClientInformationFull(
                client_id="pre-registered",
                client_secret=secret,
                token_endpoint_auth_method=method,
                redirect_uris=[AnyUrl(redirect_uri(port))],
            )
        )
        keys: dict[str, Any] = {"oauth_client_id": "pre-registered", "oauth_callback_port": port}
        if secret:
            keys |= {"oauth_client_secret_env": "PRE_SECRET", "oauth_token_auth": method}
        async with node(world, **keys) as toolkit:
            assert await call(toolkit) == "echo:hi"
    assert world.authority.registrations == 0
    [token] = world.token_requests()
    body = form(token.body)
    assert body["client_id"] == "pre-registered"
    if method == "client_secret_basic":
        assert basic_credentials(token.headers) == "pre-registered:s3cret-pre"
        assert "client_secret" not in body
    elif method == "client_secret_post":
        assert body["client_secret"] == "s3cret-pre"
        assert "authorization" not in token.headers
    else:
        assert "client_secret" not in body
        assert "authorization" not in token.headers


@pytest.mark.parametrize("method", ["client_secret_basic", "client_secret_post", "none"])
async def test_a_dynamically_registered_client_uses_the_auth_method_it_registered(
    method: Literal["client_secret_basic", "client_secret_post", "none"],
) -> None:
    async with oauth_world() as world, node(world, oauth_token_auth=method) as toolkit:
        assert await call(toolkit) == "echo:hi"
    [client] = world.authority.clients.values()
    assert client.token_endpoint_auth_method == method
    [token] = world.token_requests()
    if method == "client_secret_basic":
        assert basic_credentials(token.headers) == f"{client.client_id}:{client.client_secret}"
    elif method == "client_secret_post":
        assert form(token.body)["client_secret"] == client.client_secret
    else:
        assert client.client_secret is None
        assert "authorization" not in token.headers


async def test_a_client_id_metadata_document_replaces_registration() -> None:
    document_url = "https://client.example.com/agent-gateway/client.json"
    port = free_loopback_port()
    options = AuthorityOptions(registration=False, client_id_metadata_documents=True)
    async with oauth_world(options) as world:
        # What the server would read from the document at that URL.
        world.authority.metadata_documents[document_url] = OAuthClientInformationFull(
            client_id=document_url,
            token_endpoint_auth_method="none",
            redirect_uris=[AnyUrl(redirect_uri(port))],
            scope="read write",
        )
        keys = {"oauth_client_metadata_url": document_url, "oauth_callback_port": port}
        async with node(world, **keys) as toolkit:
            assert await call(toolkit) == "echo:hi"
    assert world.authority.registrations == 0
    assert form(world.token_requests()[0].body)["client_id"] == document_url


async def test_a_client_id_metadata_document_named_later_wins_over_a_stored_registration() -> None:
    document_url = "https://client.example.com/agent-gateway/client.json"
    port = free_loopback_port()
    options = AuthorityOptions(client_id_metadata_documents=True)
    async with oauth_world(options) as world:
        world.authority.metadata_documents[document_url] = OAuthClientInformationFull(
            client_id=document_url,
            token_endpoint_auth_method="none",
            redirect_uris=[AnyUrl(redirect_uri(port))],
            scope="read write",
        )
        async with node(world, oauth_callback_port=port) as toolkit:  # registers itself
            assert await call(toolkit) == "echo:hi"
        world.authority.revoke_all()  # the next authorization is the document's
        keys = {"oauth_client_metadata_url": document_url, "oauth_callback_port": port}
        async with node(world, **keys) as toolkit:
            assert await call(toolkit) == "echo:hi"
    assert world.authority.registrations == 1
    first, second = world.token_requests()
    assert form(first.body)["client_id"] != document_url
    assert form(second.body)["client_id"] == document_url


async def test_an_access_token_the_server_no_longer_takes_is_refreshed_not_reauthorized() -> None:
    async with oauth_world() as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
        world.authority.expire_all()
        assert await call(toolkit, text="again") == "echo:again"
    assert world.authority.grants == ["authorization_code", "refresh_token"]
    assert len(world.authority.authorizations) == 1


async def test_a_stored_token_past_its_expiry_is_refreshed_before_it_is_used(
    token_dir: Path,
) -> None:
    async with oauth_world() as world:
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        tokens = ServerTokens(FileStore(token_dir), "remote", world.url)
        entry = await tokens.load()
        assert entry.tokens is not None
        assert entry.expires_at is not None
        old = entry.tokens.access_token
        await tokens.save(entry.model_copy(update={"expires_at": 1000.0}))  # long ago
        sent_before = len(world.protected.tokens_seen())
        async with node(world) as toolkit:  # a new process, as far as the node knows
            assert await call(toolkit) == "echo:hi"
        assert old not in world.protected.tokens_seen()[sent_before:]
    assert world.authority.grants == ["authorization_code", "refresh_token"]


async def expire_stored(tokens: ServerTokens) -> OAuthToken:
    """Make the stored access token past its expiry (as another process would find it);
    returns the stored tokens."""
    entry = await tokens.load()
    assert entry.tokens is not None
    await tokens.save(entry.model_copy(update={"expires_at": 1000.0}))  # long ago
    return entry.tokens


async def test_tokens_another_process_refreshed_are_taken_not_thrown_away(
    token_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The authorization server rotates refresh tokens. A node that holds the tokens another
    process has refreshed since (its refresh token spent) takes the stored ones: it goes on
    serving, and the store keeps what the other process got."""
    async with oauth_world() as world:
        tokens = ServerTokens(FileStore(token_dir), "remote", world.url)
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        monkeypatch.delenv("AGENT_GATEWAY_OAUTH_REDIRECT")  # nobody may authorise from here
        async with node(world) as served:  # e.g. `serve`
            assert await call(served) == "echo:hi"
            held = await expire_stored(tokens)
            async with node(world) as other:  # e.g. `call`: it refreshes, and stores the new
                assert await call(other) == "echo:hi"
            assert held.refresh_token not in world.authority.refresh  # spent
            del world.authority.access[held.access_token]  # the served node's stops working
            assert await call(served, text="again") == "echo:again"
            assert served.health.state == "ready"
        stored = (await tokens.load()).tokens
        assert stored is not None
        assert stored.access_token in world.authority.access
        assert stored.refresh_token in world.authority.refresh
    assert world.authority.grants == ["authorization_code", "refresh_token"]


async def test_a_refresh_token_refused_as_invalid_grant_drops_only_those_tokens(
    token_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with oauth_world() as world:
        tokens = ServerTokens(FileStore(token_dir), "remote", world.url)
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        monkeypatch.delenv("AGENT_GATEWAY_OAUTH_REDIRECT")
        await expire_stored(tokens)
        world.authority.revoke_all()
        async with node(world) as toolkit:
            health = toolkit.health
        entry = await tokens.load()
    assert health.last_error == (
        "MCP server 'remote' needs authorisation: run `agent-gateway auth login remote`"
    )
    assert entry.tokens is None
    assert entry.client_info is not None  # a new login reuses the registration


@pytest.mark.parametrize(
    ("status", "error", "said"),
    [
        (503, "temporarily_unavailable", "answered a token refresh with HTTP 503"),
        (500, "server_error", "answered a token refresh with HTTP 500"),
        (401, "invalid_client", "refused a token refresh: HTTP 401"),
    ],
)
async def test_a_refresh_that_fails_otherwise_keeps_the_tokens_for_a_later_one(
    token_dir: Path, monkeypatch: pytest.MonkeyPatch, status: int, error: str, said: str
) -> None:
    """Only `invalid_grant` says a refresh token is dead (RFC 6749 §5.2): after a 5xx (or
    another refusal) the node says what the authorization server answered, not that it
    needs a login, and once the authorization server answers again a refresh works."""
    async with oauth_world() as world:
        tokens = ServerTokens(FileStore(token_dir), "remote", world.url)
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        monkeypatch.delenv("AGENT_GATEWAY_OAUTH_REDIRECT")
        held = await expire_stored(tokens)
        world.authority.token_failure = (status, error)
        async with node(world) as toolkit:
            health = toolkit.health
        assert (await tokens.load()).tokens == held
        world.authority.token_failure = None
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
    assert health.state == "failed"
    assert health.last_error is not None
    assert health.last_error.startswith(
        f"MCP server 'remote': its authorization server {said} ({error}); the stored tokens "
        "are kept, and the refresh is tried again"
    )
    assert "needs authorisation" not in health.last_error
    assert world.authority.grants == ["authorization_code", "refresh_token"]


async def test_with_a_stored_token_the_refused_first_request_costs_one_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with oauth_world() as world:
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        # Closing a response waits up to this long for the rest of its body; the 401, read to
        # its end by the authorization flow, has no rest: its close must not wait at all.
        monkeypatch.setattr(transport, "_DRAIN_SECONDS", 30.0)
        before = len(world.protected.seen)
        with anyio.fail_after(10):
            async with node(world) as toolkit:  # a new process: the token comes from the store
                assert toolkit.health.state == "ready", toolkit.health
                assert await call(toolkit) == "echo:hi"
    refused, retried = [r for r in world.protected.seen[before:] if r.method == "POST"][:2]
    assert "authorization" not in refused.headers  # the node does not read the store first
    assert retried.headers["authorization"].startswith("Bearer ")
    assert retried.client_port == refused.client_port  # and the connection is reused
    assert world.authority.grants == ["authorization_code"]


async def test_a_revoked_grant_leads_to_a_new_authorization() -> None:
    async with oauth_world() as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
        world.authority.revoke_all()
        # The call that meets the revocation loses its connection; the node reconnects.
        result = await toolkit.call_tool("remote__echo", {"text": "after"})
        if result.is_error:
            result = await toolkit.call_tool("remote__echo", {"text": "after"})
        assert not result.is_error, result
    assert world.authority.grants == ["authorization_code", "authorization_code"]


async def test_insufficient_scope_steps_up_to_the_union_of_scopes() -> None:
    async with oauth_world() as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
        assert await call(toolkit, "write", "x") == "wrote:x"
        assert await call(toolkit) == "echo:hi"  # the earlier grant still holds
    first, second = world.authority.authorizations
    assert first.scopes == ["read"]
    assert second.scopes == ["read", "write"]


async def test_step_up_gives_up_after_the_limit_when_the_scope_is_never_granted() -> None:
    """The call fails saying what the server wanted and what was granted, not as a broken
    connection or a bare server error; the connection serves the other tools on."""
    options = AuthorityOptions(withhold=frozenset({"write"}))
    async with oauth_world(options) as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
        for _ in range(STEP_UP_LIMIT + 2):
            with pytest.raises(AuthorizationRequired) as refused:
                await toolkit.call_tool("remote__write", {"text": "x"})
            assert str(refused.value) == (
                "MCP server 'remote' refused the call: insufficient_scope (it needs `read "
                "write`; the authorization server granted `read`)"
            )
        assert await call(toolkit) == "echo:hi"
        assert toolkit.health.state == "ready"
    assert len(world.authority.authorizations) == 1 + STEP_UP_LIMIT


async def test_without_a_person_a_node_says_which_command_authorises_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv("AGENT_GATEWAY_OAUTH_REDIRECT")
    async with oauth_world() as world, node(world) as toolkit:
        health = toolkit.health
    assert health.state == "failed"
    assert health.last_error == (
        "MCP server 'remote' needs authorisation: run `agent-gateway auth login remote`"
    )
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [
        "could not connect (attempt 1): MCP server 'remote' needs authorisation: "
        "run `agent-gateway auth login remote`"
    ]
    assert world.authority.registrations == 0  # nothing is registered on a person's behalf


async def test_a_401_to_a_node_whose_oauth_is_off_says_so() -> None:
    async with oauth_world() as world, node(world, oauth=False) as toolkit:
        health = toolkit.health
    assert health.state == "failed"
    assert health.last_error == (
        "ServerConfigError: MCP server 'remote' answered HTTP 401 (invalid_token): "
        "mcpServers.remote.oauth is false, so no authorization flow answers it"
    )
    assert not world.authority_seen  # nothing was asked of the authorization server


async def test_tokens_are_never_logged_and_the_store_is_private(
    token_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with oauth_world() as world, node(world) as toolkit:
        assert await call(toolkit) == "echo:hi"
    [client] = world.authority.clients.values()
    secrets = [*world.authority.access, *world.authority.refresh, str(client.client_id)]
    assert secrets
    logged = caplog.text
    for secret in secrets[:-1]:
        assert secret not in logged
    assert stat.S_IMODE(os.stat(token_dir).st_mode) == 0o700
    lock, stored = sorted(os.listdir(token_dir))  # the entry's lock file, then the entry
    assert lock == f".{stored.removesuffix('.json')}.lock"
    for name in (lock, stored):
        assert stat.S_IMODE(os.stat(token_dir / name).st_mode) == 0o600
    assert next(iter(world.authority.access)) in read_text(token_dir / stored)
    assert read_text(token_dir / lock) == ""


async def test_a_token_is_never_sent_to_another_server_under_the_same_name() -> None:
    async with oauth_world() as first:
        async with node(first) as toolkit:
            assert await call(toolkit) == "echo:hi"
        issued = set(first.authority.access)
        async with oauth_world() as second, node(second) as toolkit:
            assert await call(toolkit) == "echo:hi"
        assert issued.isdisjoint(second.protected.tokens_seen())
        assert second.authority.grants == ["authorization_code"]


async def test_a_refresh_cut_off_by_the_connect_timeout_says_what_it_waited_for(
    token_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process refreshing holds the entry's lock past the connection's deadline: the
    node's error can only say it did not connect, so the wait is told beside it."""
    caplog.set_level(logging.WARNING, logger="toolkits.mcp.oauth")
    async with oauth_world() as world:
        async with node(world) as toolkit:
            assert await call(toolkit) == "echo:hi"
        tokens = ServerTokens(FileStore(token_dir), "remote", world.url)
        await expire_stored(tokens)
        async with tokens.locked():  # the other process's refresh, under way
            with anyio.fail_after(20):
                async with node(world, connect_timeout=1) as toolkit:
                    with pytest.raises(ServerUnavailable, match="no handshake and tool list"):
                        await call(toolkit)
    assert (
        "remote: cut off waiting for another refresh of its tokens (another process holds "
        "their lock)" in caplog.messages
    )
