"""Authorising the gateway at a server ahead of time, seeing what is authorised, forgetting it.

`login` connects to the server with a provider that may involve a person (`browser`) or fetch
the authorization page itself (`fetch`); the tokens it gets land in the user's store, where
every node reads them. It authorizes anew, asking for the scopes the stored token had and
those a step-up wanted (`oauth`), and what was stored stays until the new tokens arrive: a
login that fails, times out or is interrupted leaves the previous authorization in place. `status` says, per server, whether tokens are stored, until when, for
which scopes. `logout` revokes a server's tokens at its authorization server (RFC 7009, when
it has a revocation endpoint) and forgets them and the registration.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import anyio
import httpx2
from mcp import Client
from mcp_types.version import LATEST_MODERN_VERSION

from ..errors import ServerConfigError
from .config import McpServerConfig
from .oauth import RedirectMode, oauth_for, uses_oauth
from .oauth_clients import client_authentication, registered_client
from .oauth_store import OAuthEntry, ServerTokens, TokenStore, default_store
from .stderr_tail import StderrTail
from .tool_listing import ToolListing
from .transport import config_transport

__all__ = ["AuthorizationStatus", "LogoutOutcome", "login", "logout", "status", "status_of_all"]

_LOGIN_SECONDS = 360.0
_REVOKE_SECONDS = 10.0
_MODES = {"auto": "auto", "legacy": "legacy", "modern": LATEST_MODERN_VERSION}

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AuthorizationStatus:
    """What is stored for one server (no secret in it)."""

    server: str
    url: str
    authorised: bool
    expires_at: datetime | None = None
    scopes: tuple[str, ...] = ()
    refreshable: bool = False

    def __str__(self) -> str:
        if not self.authorised:
            return f"{self.server}: not authorised (agent-gateway auth login {self.server})"
        parts = [f"{self.server}: authorised"]
        if self.expires_at is not None:
            expired = self.expires_at.timestamp() <= time.time()
            when = f"{self.expires_at:%Y-%m-%d %H:%M:%S}Z"
            if expired:
                parts.append(
                    f"token expired {when}" + (", refreshable" if self.refreshable else "")
                )
            else:
                parts.append(f"token expires {when}")
        parts.append(f"scopes: {' '.join(self.scopes) or '(none named)'}")
        return ", ".join(parts)


def _every(name: str) -> bool:
    del name
    return True


def _oauth_config(name: str, config: McpServerConfig) -> McpServerConfig:
    if not uses_oauth(config):
        why = (
            "it is a stdio server"
            if config.kind == "stdio"
            else "it sends a static token"
            if config.oauth
            else "its `oauth` is false"
        )
        raise ServerConfigError(f"MCP server {name!r} does not use OAuth: {why}")
    return config


async def login(
    name: str,
    config: McpServerConfig,
    *,
    mode: RedirectMode = "browser",
    store: TokenStore | None = None,
    announce: Callable[[str], None] | None = None,
) -> tuple[AuthorizationStatus, int]:
    """Authorise at server `name` now (a new authorization, even with tokens stored; they are
    replaced once the new ones arrive).

    Returns the stored status and how many tools the server then listed. Raises
    `ServerConfigError` for a server that does not use OAuth, `OAuthFlowError` (and other errors
    of the flow) when the authorization fails.
    """
    config = _oauth_config(name, config)
    assert config.url is not None
    store = store or default_store()
    provider = await oauth_for(name, config, mode=mode, store=store, announce=announce, fresh=True)
    transport = config_transport(
        config, name=name, log=log, stderr_tail=StderrTail(), auth=provider
    )
    with anyio.fail_after(_LOGIN_SECONDS):
        async with Client(transport, mode=_MODES[config.protocol], cache=None) as client:
            # One tool the SDK refuses must not fail the login (`tool_listing`).
            listed = await ToolListing(name, log=log, offered=_every).fetch(client)
    if not provider.authorized:
        raise ServerConfigError(f"MCP server {name!r} did not ask for authorisation")
    return (await status(name, config, store=store)), len(listed)


async def status(
    name: str, config: McpServerConfig, *, store: TokenStore | None = None
) -> AuthorizationStatus:
    assert config.url is not None
    entry = await ServerTokens(store or default_store(), name, config.url).load()
    tokens = entry.tokens
    if tokens is None:
        return AuthorizationStatus(server=name, url=config.url, authorised=False)
    expires = datetime.fromtimestamp(entry.expires_at, UTC) if entry.expires_at else None
    return AuthorizationStatus(
        server=name,
        url=config.url,
        authorised=True,
        expires_at=expires,
        scopes=tuple((tokens.scope or "").split()),
        refreshable=tokens.refresh_token is not None,
    )


async def status_of_all(
    servers: Mapping[str, McpServerConfig], *, store: TokenStore | None = None
) -> list[AuthorizationStatus]:
    """The status of every server that uses OAuth, in config order."""
    store = store or default_store()
    return [
        await status(name, config, store=store)
        for name, config in servers.items()
        if uses_oauth(config)
    ]


@dataclass(frozen=True, slots=True)
class LogoutOutcome:
    """What `logout` did. The tokens are deleted here whatever the authorization server said."""

    server: str
    forgotten: bool
    """Anything was stored."""
    revoked: bool = False
    """The authorization server revoked the stored tokens (RFC 7009)."""
    failure: str | None = None
    """Revoking was tried and failed: the tokens may stay valid until they expire."""
    skipped: str | None = None
    """Why revoking was not tried."""

    def __str__(self) -> str:
        if not self.forgotten:
            return f"{self.server}: nothing was stored"
        if self.revoked:
            return f"{self.server}: tokens revoked at the authorization server, forgotten here"
        if self.skipped is not None:
            return f"{self.server}: forgotten here (not revoked: {self.skipped})"
        return f"{self.server}: forgotten here"


async def logout(
    name: str, config: McpServerConfig, *, store: TokenStore | None = None
) -> LogoutOutcome:
    """Revoke the server's tokens at its authorization server, when it publishes a revocation
    endpoint, then forget them and the registration here (also when revoking failed), all
    under the entry's lock.

    Raises `StoreLocked` when another process holds the entry too long."""
    config = _oauth_config(name, config)
    assert config.url is not None
    tokens = ServerTokens(store or default_store(), name, config.url)
    # Under the entry's lock: a refresh under way in another process ends first, and the
    # tokens it stored are the ones revoked and forgotten (not written back after).
    async with tokens.locked():
        entry = await tokens.load()
        outcome = LogoutOutcome(name, forgotten=False)
        if entry.tokens is not None:
            outcome = await _revoke(name, config, entry)
        return replace(outcome, forgotten=await tokens.forget())


async def _revoke(name: str, config: McpServerConfig, entry: OAuthEntry) -> LogoutOutcome:
    """Revoke the refresh token (which may end the whole grant), then the access token."""
    assert entry.tokens is not None
    metadata = entry.server_metadata
    if metadata is None or metadata.revocation_endpoint is None:
        why = "no revocation endpoint" if metadata else "its metadata was not stored"
        return LogoutOutcome(name, forgotten=True, skipped=f"the authorization server has {why}")
    try:
        client = registered_client(name, config, entry.client_info)
    except ServerConfigError as exc:
        return LogoutOutcome(name, forgotten=True, failure=str(exc))
    if client is None:
        return LogoutOutcome(name, forgotten=True, skipped="no client registration is stored")
    endpoint = str(metadata.revocation_endpoint)
    tokens = entry.tokens
    async with httpx2.AsyncClient(timeout=_REVOKE_SECONDS) as http:
        for hint, token in (
            ("refresh_token", tokens.refresh_token),
            ("access_token", tokens.access_token),
        ):
            if token is None:
                continue
            data, headers = client_authentication(client, {"token": token, "token_type_hint": hint})
            try:
                response = await http.post(endpoint, data=data, headers=headers)
            except httpx2.HTTPError as exc:
                why = f"{endpoint} did not answer ({type(exc).__name__}: {exc})"
                return LogoutOutcome(name, forgotten=True, failure=why)
            if response.status_code != 200:  # RFC 7009 §2.2: 200 even for an unknown token
                why = f"{endpoint} answered HTTP {response.status_code}{_error_of(response)}"
                return LogoutOutcome(name, forgotten=True, failure=why)
    return LogoutOutcome(name, forgotten=True, revoked=True)


def _error_of(response: httpx2.Response) -> str:
    """The OAuth error a refusal names (RFC 6749 §5.2), if any."""
    try:
        error: object = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return f" ({error})" if isinstance(error, str) else ""
