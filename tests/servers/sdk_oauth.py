"""The mcp SDK's own OAuth client, as a foreign MCP client uses it against our gateway.

`sdk_oauth(url)` is the SDK's `OAuthClientProvider` with tokens in memory and an approval
without a person: the authorization URL is fetched and the code taken from the redirect's
`Location` (nothing listens on the registered redirect URI). Every authorization it made is
kept, with the scopes it asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

__all__ = ["MemoryTokens", "SdkOAuth", "sdk_oauth"]


@dataclass
class MemoryTokens:
    """The SDK's `TokenStorage`, in memory."""

    tokens: OAuthToken | None = None
    client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


@dataclass
class SdkOAuth:
    provider: OAuthClientProvider
    storage: MemoryTokens
    asked_scopes: list[str | None] = field(default_factory=list[str | None])
    """The `scope` of each authorization request, in order."""


def sdk_oauth(url: str) -> SdkOAuth:
    storage = MemoryTokens()
    codes: list[AuthorizationCodeResult] = []
    asked: list[str | None] = []

    async def approve(authorization_url: str) -> None:
        asked.append(parse_qs(urlsplit(authorization_url).query).get("scope", [None])[0])
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location")
        if response.status_code != 302 or location is None:
            raise OAuthFlowError(f"the authorization server answered {response.status_code}")
        query = {key: values[0] for key, values in parse_qs(urlsplit(location).query).items()}
        codes.append(
            AuthorizationCodeResult(
                code=query["code"], state=query.get("state"), iss=query.get("iss")
            )
        )

    async def callback() -> AuthorizationCodeResult:
        return codes.pop()

    metadata = OAuthClientMetadata(
        client_name="sdk-client",
        redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")],
        token_endpoint_auth_method="none",
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
    )
    provider = OAuthClientProvider(url, metadata, storage, approve, callback)
    return SdkOAuth(provider, storage, asked)
