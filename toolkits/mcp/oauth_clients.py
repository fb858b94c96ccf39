"""Who the gateway is at a server's authorization server: the config's pre-registered client
(its secret read from the environment, never stored), else the registration it stored, and
how a request to a token or revocation endpoint authenticates as it (RFC 6749 §2.3.1)."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Literal
from urllib.parse import quote, urlsplit

from mcp.shared.auth import OAuthClientInformationFull
from pydantic import AnyUrl

from .config import McpServerConfig, secret_from_env

__all__ = [
    "CLIENT_NAME",
    "AuthMethod",
    "auth_method",
    "client_authentication",
    "client_secret",
    "pre_registered",
    "registered_client",
    "registered_port",
]

CLIENT_NAME = "agent-gateway"


def registered_client(
    name: str, config: McpServerConfig, stored: OAuthClientInformationFull | None
) -> OAuthClientInformationFull | None:
    """Who the gateway is at the server's authorization server: the config's pre-registered
    client (its secret read from the environment), else the `stored` registration.

    Raises `ServerConfigError` for an unset client secret variable.
    """
    if config.oauth_client_id is None:
        return stored
    secret = client_secret(name, config)
    return pre_registered(config.oauth_client_id, secret, auth_method(config, secret), None)


def client_authentication(
    client: OAuthClientInformationFull, data: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """The form and headers of a request to a token or revocation endpoint, authenticated as
    `client` registered (RFC 6749 §2.3.1: HTTP Basic, or the secret in the form; a public
    client names its `client_id` alone)."""
    form = {**data, "client_id": client.client_id}
    secret = client.client_secret
    method = client.token_endpoint_auth_method
    if method == "client_secret_basic" and secret:
        pair = f"{quote(client.client_id, safe='')}:{quote(secret, safe='')}"
        return form, {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
    if method == "client_secret_post" and secret:
        form["client_secret"] = secret
    return form, {}


AuthMethod = Literal["none", "client_secret_basic", "client_secret_post"]


def client_secret(name: str, config: McpServerConfig) -> str | None:
    if config.oauth_client_secret_env is None:
        return None
    what = f"the OAuth client secret of MCP server {name!r}"
    return secret_from_env(config.oauth_client_secret_env, what)


def auth_method(config: McpServerConfig, secret: str | None) -> AuthMethod:
    return config.oauth_token_auth or ("client_secret_basic" if secret else "none")


def pre_registered(
    client_id: str, secret: str | None, auth: AuthMethod, callback: AnyUrl | None
) -> OAuthClientInformationFull:
    return OAuthClientInformationFull(
        client_id=client_id,
        client_secret=secret,
        token_endpoint_auth_method=auth,
        redirect_uris=[callback] if callback is not None else None,
        client_name=CLIENT_NAME,
    )


def registered_port(client: OAuthClientInformationFull | None) -> int | None:
    # A dynamically registered client is bound to its redirect URI: reuse its port.
    for uri in (client.redirect_uris or []) if client else []:
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    return None
