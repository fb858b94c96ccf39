"""`logout` revokes the stored tokens at the authorization server (RFC 7009), authenticated as
the client registered, before forgetting them; a server without a revocation endpoint only
loses them here."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import anyio
import pytest
from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl

from tests.servers.oauth import AuthorityOptions, oauth_world
from toolkits.mcp import McpServerConfig
from toolkits.mcp.authorization import login, logout, status
from toolkits.mcp.oauth_callback import free_loopback_port, redirect_uri
from toolkits.mcp.oauth_store import FileStore, ServerTokens

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("method", ["none", "client_secret_basic", "client_secret_post"])
async def test_logout_revokes_both_tokens_as_the_registered_client(
    method: Literal["none", "client_secret_basic", "client_secret_post"], tmp_path: Path
) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url, oauth_token_auth=method)
        await login("remote", config, mode="fetch", store=store)
        issued = [*world.authority.refresh, *world.authority.access]
        outcome = await logout("remote", config, store=store)
        assert (outcome.revoked, outcome.failure, outcome.forgotten) == (True, None, True)
        assert world.authority.revoked == issued
        assert not (await status("remote", config, store=store)).authorised
        [seen] = [r for r in world.authority_seen if r.path == "/revoke"][:1]
        if method == "client_secret_basic":
            assert seen.headers["authorization"].startswith("Basic ")
        else:
            assert "authorization" not in seen.headers


async def test_a_pre_registered_client_revokes_with_its_secret_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRE_SECRET", "s3cret-pre")
    store = FileStore(tmp_path / "oauth")
    port = free_loopback_port()
    async with oauth_world() as world:
        world.authority.add_client(
            OAuthClientInformationFull(
                client_id="pre-registered",
                client_secret="s3cret-pre",
                token_endpoint_auth_method="client_secret_post",
                redirect_uris=[AnyUrl(redirect_uri(port))],
            )
        )
        keys: dict[str, Any] = {
            "oauth_client_id": "pre-registered",
            "oauth_client_secret_env": "PRE_SECRET",
            "oauth_token_auth": "client_secret_post",
            "oauth_callback_port": port,
        }
        config = McpServerConfig(url=world.url, **keys)
        await login("remote", config, mode="fetch", store=store)
        outcome = await logout("remote", config, store=store)
        assert outcome.revoked, outcome
        assert len(world.authority.revoked) == 2


async def test_without_a_revocation_endpoint_the_tokens_are_only_forgotten(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world(AuthorityOptions(revocation="absent")) as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        outcome = await logout("remote", config, store=store)
        assert str(outcome) == (
            "remote: forgotten here (not revoked: the authorization server has no revocation "
            "endpoint)"
        )
        assert outcome.failure is None
        assert not [r for r in world.authority_seen if r.path == "/revoke"]
        assert str(await logout("remote", config, store=store)) == "remote: nothing was stored"


async def test_logout_waits_for_a_refresh_under_way_and_revokes_what_it_stored(
    tmp_path: Path,
) -> None:
    """Another process refreshing holds the entry's lock: logout waits for it, then revokes and
    forgets the tokens that refresh stored, not the spent ones it would have read before."""
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        refreshing = ServerTokens(store, "remote", world.url)
        spent = await refreshing.get_tokens()
        assert spent is not None
        assert spent.refresh_token is not None
        async with refreshing.locked():
            with anyio.move_on_after(0.3) as waiting:
                await logout("remote", config, store=store)
            assert waiting.cancelled_caught
            assert world.authority.revoked == []
            client = next(iter(world.authority.clients))
            new = world.authority.issue(client, ["read"], None)
            with refreshing.refreshing(spent):
                await refreshing.set_tokens(new)
        outcome = await logout("remote", config, store=store)
        assert (outcome.revoked, outcome.forgotten) == (True, True)
        assert world.authority.revoked == [new.refresh_token, new.access_token]
        assert await refreshing.get_tokens() is None


async def test_a_refresh_that_answers_after_logout_stores_nothing(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "oauth")
    async with oauth_world() as world:
        config = McpServerConfig(url=world.url)
        await login("remote", config, mode="fetch", store=store)
        late = ServerTokens(store, "remote", world.url)
        spent = await late.get_tokens()
        assert spent is not None
        await logout("remote", config, store=store)
        client = next(iter(world.authority.clients))
        with late.refreshing(spent):
            await late.set_tokens(world.authority.issue(client, ["read"], None))
        assert late.refresh_dropped
        assert not (await status("remote", config, store=store)).authorised
