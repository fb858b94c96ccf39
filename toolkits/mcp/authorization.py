"""Authorising the gateway at a server ahead of time, seeing what is authorised, forgetting it.

`login` connects to the server with a provider that may involve a person (`browser`) or fetch
the authorization page itself (`fetch`); the tokens it gets land in the user's store, where
every node reads them. It authorizes anew, asking for the scopes the stored token had and
those a step-up wanted (`oauth`), and what was stored stays until the new tokens arrive: a
login that fails, times out or is interrupted leaves the previous authorization in place; once
the new tokens are stored, the refresh token they replaced is revoked (RFC 7009), a failure
of which is only a warning. `status` says, per server, whether tokens are stored, until when,
for which scopes. `logout` revokes a server's tokens at its authorization server (RFC 7009, when
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
from mcp.shared.auth import OAuthClientInformationFull
from mcp_types.version import LATEST_MODERN_VERSION

from ..errors import ServerConfigError
from .config import McpServerConfig
from .oauth import RedirectMode, oauth_for, uses_oauth
from .oauth_clients import client_authentication, registered_client
from .oauth_store import OAuthEntry, ServerTokens, TokenStore, default_store
from .stderr_tail import StderrTail
from .token_requests import TOKEN_SECONDS
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
    token_seconds: float = TOKEN_SECONDS,
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
    before = await ServerTokens(store, name, config.url).load()
    provider = await oauth_for(
        name,
        config,
        mode=mode,
        store=store,
        announce=announce,
        fresh=True,
        token_seconds=token_seconds,
    )
    transport = config_transport(
        config, name=name, log=log, stderr_tail=StderrTail(), auth=provider
    )
    try:
        with anyio.fail_after(_LOGIN_SECONDS):
            async with Client(transport, mode=_MODES[config.protocol], cache=None) as client:
                # One tool the SDK refuses must not fail the login (`tool_listing`).
                listed = await ToolListing(name, log=log, offered=_every).fetch(client)
    except Exception as exc:
        silent = provider.token_requests.silence(exc)  # a generic timeout: say where
        if silent is None:
            raise
        raise silent from exc
    if not provider.authorized:
        raise ServerConfigError(f"MCP server {name!r} did not ask for authorisation")
    await _revoke_replaced(name, config, provider.tokens, before)  # bounded by its timeout
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
    target = _revocation_target(name, config, entry)
    if isinstance(target, _NotRevoked):
        failure, skipped = (target.why, None) if target.failed else (None, target.why)
        return LogoutOutcome(name, forgotten=True, failure=failure, skipped=skipped)
    tokens = entry.tokens
    failure = await _revoke_tokens(
        *target,
        [("refresh_token", tokens.refresh_token), ("access_token", tokens.access_token)],
    )
    return LogoutOutcome(name, forgotten=True, revoked=failure is None, failure=failure)


@dataclass(frozen=True, slots=True)
class _NotRevoked:
    why: str
    failed: bool = False
    """Revoking cannot be tried because of an error (else: there is nothing to revoke with)."""


def _revocation_target(
    name: str, config: McpServerConfig, entry: OAuthEntry
) -> tuple[str, OAuthClientInformationFull] | _NotRevoked:
    """The revocation endpoint `entry`'s authorization server names and the client its tokens
    were issued to, or why revoking cannot be tried."""
    metadata = entry.server_metadata
    if metadata is None or metadata.revocation_endpoint is None:
        why = "no revocation endpoint" if metadata else "its metadata was not stored"
        return _NotRevoked(f"the authorization server has {why}")
    try:
        client = registered_client(name, config, entry.client_info)
    except ServerConfigError as exc:
        return _NotRevoked(str(exc), failed=True)
    if client is None:
        return _NotRevoked("no client registration is stored")
    return str(metadata.revocation_endpoint), client


async def _revoke_tokens(
    endpoint: str, client: OAuthClientInformationFull, tokens: list[tuple[str, str | None]]
) -> str | None:
    """Revoke each (hint, token) in order, stopping at the first failure; what failed, or None."""
    async with httpx2.AsyncClient(timeout=_REVOKE_SECONDS) as http:
        for hint, token in tokens:
            if token is None:
                continue
            data, headers = client_authentication(client, {"token": token, "token_type_hint": hint})
            try:
                response = await http.post(endpoint, data=data, headers=headers)
            except httpx2.HTTPError as exc:
                return f"{endpoint} did not answer ({type(exc).__name__}: {exc})"
            if response.status_code != 200:  # RFC 7009 §2.2: 200 even for an unknown token
                return f"{endpoint} answered HTTP {response.status_code}{_error_of(response)}"
    return None


async def _revoke_replaced(
    name: str, config: McpServerConfig, tokens: ServerTokens, before: OAuthEntry
) -> None:
    """Revoke the refresh token a login's new tokens replaced (RFC 7009), authenticated as the
    client of the entry `before` the login, with the authorization server's metadata as
    stored now. A failure is a warning: the login itself succeeded."""
    replaced, now = tokens.replaced, await tokens.load()
    old = replaced.refresh_token if replaced is not None else None
    if old is None or now.tokens is None or old == now.tokens.refresh_token:
        return  # none, or the server handed the same one back: it is the new grant's
    if tokens.client_forgotten:  # the server forgot that client, and its tokens with it
        log.info("%s: the replaced tokens' client is no longer registered; not revoked", name)
        return
    target = _revocation_target(
        name, config, before.model_copy(update={"server_metadata": now.server_metadata})
    )
    if isinstance(target, _NotRevoked):
        log.info("%s: the replaced refresh token is not revoked: %s", name, target.why)
        return
    failure = await _revoke_tokens(*target, [("refresh_token", old)])
    if failure is not None:
        log.warning(
            "%s: could not revoke the refresh token this login replaced: %s; it stays valid "
            "at the authorization server until it expires",
            name,
            failure,
        )


def _error_of(response: httpx2.Response) -> str:
    """The OAuth error a refusal names (RFC 6749 §5.2), if any."""
    try:
        error: object = response.json().get("error")
    except (ValueError, AttributeError):
        return ""
    return f" ({error})" if isinstance(error, str) else ""
