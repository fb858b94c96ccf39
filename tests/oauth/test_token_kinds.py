"""`serve --http` as a resource server takes access tokens only: a refresh token (or an ID
token) its issuer vouches for, by introspection or signature, is refused 401 `invalid_token`,
whichever field of the answer says what kind of token it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.server.transports.auth import OAuthTokens

from .test_scope_challenge import challenge, gateway_behind, post
from .test_token_checks import RESOURCE, issuer_serving, settings

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


async def test_a_refresh_token_is_refused_where_its_access_token_is_taken(
    tmp_path: Path,
) -> None:
    """The real authorization server's introspection answers for its refresh tokens too
    (`active`, `token_type: refresh_token`), with the same audience and scopes."""
    async with gateway_behind(tmp_path) as served:
        issued = served.authority.issue("some-client", ["mcp", "admin"], served.url)
        assert issued.refresh_token is not None
        taken = await post(served.url, issued.access_token, "ping")
        assert taken.status_code not in (401, 403, 503), taken.text
        refused = await post(served.url, issued.refresh_token, "ping")
        assert refused.status_code == 401
        assert challenge(refused)["error"] == "invalid_token"


@pytest.mark.parametrize(
    "kind",
    [
        {"token_type": "refresh_token"},
        {"token_type": "urn:ietf:params:oauth:token-type:refresh_token"},  # RFC 8693 §3
        {"token_type": "urn:ietf:params:oauth:token-type:id_token"},
        {"token_use": "refresh_token"},  # Ory Hydra
        {"token_use": "id"},  # Amazon Cognito
        {"typ": "Refresh"},  # Keycloak
        {"typ": "Offline"},  # Keycloak's offline refresh token
        {"typ": "ID"},
    ],
)
async def test_an_answer_saying_it_is_not_an_access_token_is_a_refusal(
    kind: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        good = {"active": True, "sub": "bob", "scope": "mcp", "aud": RESOURCE}
        issuer.opaque = {"opaque-access": good, "opaque-other": good | kind}
        tokens = OAuthTokens(settings(issuer))
        assert await tokens.verify_token("opaque-access") is not None
        assert await tokens.verify_token("opaque-other") is None
        assert await tokens.verify_token(issuer.token(RESOURCE)) is not None
        assert await tokens.verify_token(issuer.token(RESOURCE, **kind)) is None  # as a JWT


@pytest.mark.parametrize(
    "kind",
    [
        {"token_type": "Bearer"},  # RFC 6749 §7.1
        {"token_type": "DPoP"},
        {"token_type": "urn:ietf:params:oauth:token-type:access_token"},
        {"token_use": "access_token"},
        {"token_use": "access"},
        {"typ": "Bearer"},
    ],
)
async def test_an_answer_saying_it_is_an_access_token_is_taken(
    kind: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    async with issuer_serving(monkeypatch) as issuer:
        good = {"active": True, "sub": "bob", "scope": "mcp", "aud": RESOURCE}
        issuer.opaque = {"opaque-access": good | kind}
        tokens = OAuthTokens(settings(issuer))
        assert await tokens.verify_token("opaque-access") is not None
        assert await tokens.verify_token(issuer.token(RESOURCE, **kind)) is not None
