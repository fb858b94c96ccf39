"""`login` revokes the refresh token its new tokens replaced (RFC 7009), once they are stored,
authenticated as the client it was issued to; a revocation that fails is a warning, never a
failed login. A token endpoint that does not answer is named, and changes nothing."""

from __future__ import annotations

import logging
from pathlib import Path
from urllib.parse import parse_qs

import anyio
import pytest
from mcp.client.auth import OAuthFlowError

from tests.servers.oauth import AuthorityOptions, OAuthWorld, oauth_world
from toolkits.mcp import McpServerConfig
from toolkits.mcp.authorization import login
from toolkits.mcp.oauth_store import FileStore, ServerTokens

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def revocations(world: OAuthWorld) -> list[dict[str, str]]:
    return [
        {key: values[0] for key, values in parse_qs(seen.body.decode()).items()}
        for seen in world.authority_seen
        if seen.path == "/revoke"
    ]


async def test_a_new_login_revokes_the_refresh_token_it_replaced(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        assert revocations(world) == []  # nothing was replaced
        [old_refresh] = world.authority.refresh
        [client] = world.authority.clients
        await login("remote", config, mode="fetch", store=store)
        new = await ServerTokens(store, "remote", world.url).get_tokens()
        assert new is not None
        assert new.refresh_token != old_refresh
        [revocation] = revocations(world)
        assert revocation == {
            "token": old_refresh,
            "token_type_hint": "refresh_token",
            "client_id": client,  # a public client: no secret
        }
        assert world.authority.revoked == [old_refresh]
        assert list(world.authority.refresh) == [new.refresh_token]  # the new grant lives
        assert new.access_token in world.authority.access


async def test_a_revocation_that_fails_is_a_warning_and_the_login_stands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world(AuthorityOptions(revocation="broken")) as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        [old_refresh] = world.authority.refresh
        status, tools = await login("remote", config, mode="fetch", store=store)
        assert (status.authorised, tools) == (True, 2)
        new = await ServerTokens(store, "remote", world.url).get_tokens()
        assert new is not None
        assert new.refresh_token != old_refresh
        assert len(revocations(world)) == 1
    [warning] = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert warning.getMessage() == (
        "remote: could not revoke the refresh token this login replaced: "
        f"{world.authority.issuer}/revoke answered HTTP 503 (temporarily_unavailable); it stays "
        "valid at the authorization server until it expires"
    )
    assert old_refresh not in caplog.text


async def test_without_a_revocation_endpoint_nothing_is_revoked(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world(AuthorityOptions(revocation="absent")) as world:
        config = McpServerConfig(url=world.url)
        for _ in range(2):
            await login("remote", config, mode="fetch", store=store)
        assert revocations(world) == []
        assert len(world.authority.refresh) == 2


async def test_tokens_of_a_client_the_server_forgot_are_not_revoked(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """They went with the registration; asking would only be refused (invalid_client)."""
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        world.authority.clients.clear()  # it restarted, and forgot every registration
        await login("remote", config, mode="fetch", store=store)
        assert world.authority.registrations == 2
        assert revocations(world) == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_token_endpoint_that_hangs_is_named_and_nothing_is_changed(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        before = await ServerTokens(store, "remote", world.url).load()
        held = world.authority.token_held = anyio.Event()
        try:
            with anyio.fail_after(30), pytest.raises(OAuthFlowError) as raised:
                await login("remote", config, mode="fetch", store=store, token_seconds=1)
        finally:
            held.set()
        assert str(raised.value) == (
            f"the token endpoint {world.authority.issuer}/token did not answer within 1 s; "
            "nothing was changed: the stored authorization (if any) is as it was"
        )
        after = await ServerTokens(store, "remote", world.url).load()
        assert after.tokens == before.tokens
        assert revocations(world) == []
