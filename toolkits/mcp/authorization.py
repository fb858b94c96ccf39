"""Authorising the gateway at a server ahead of time, seeing what is authorised, forgetting it.

`login` connects to the server with a provider that may involve a person (`browser`) or fetch
the authorization page itself (`fetch`); the tokens it gets land in the user's store, where
every node reads them. `status` says, per server, whether tokens are stored, until when, for
which scopes. `logout` forgets a server's tokens and registration.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from mcp import Client
from mcp_types.version import LATEST_MODERN_VERSION

from ..errors import ConfigError
from .config import McpServerConfig
from .oauth import RedirectMode, oauth_for, uses_oauth
from .oauth_store import ServerTokens, TokenStore, default_store
from .transport import config_transport

__all__ = ["AuthorizationStatus", "login", "logout", "status", "status_of_all"]

_LOGIN_SECONDS = 360.0
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


def _oauth_config(name: str, config: McpServerConfig) -> McpServerConfig:
    if not uses_oauth(config):
        why = (
            "it is a stdio server"
            if config.kind == "stdio"
            else "it sends a static token"
            if config.oauth
            else "its `oauth` is false"
        )
        raise ConfigError(f"MCP server {name!r} does not use OAuth: {why}")
    return config


async def login(
    name: str,
    config: McpServerConfig,
    *,
    mode: RedirectMode = "browser",
    store: TokenStore | None = None,
    announce: Callable[[str], None] | None = None,
) -> tuple[AuthorizationStatus, int]:
    """Authorise at server `name` now (a new authorization, even with tokens stored).

    Returns the stored status and how many tools the server then listed. Raises
    `ConfigError` for a server that does not use OAuth, `OAuthFlowError` (and other errors
    of the flow) when the authorization fails.
    """
    config = _oauth_config(name, config)
    assert config.url is not None
    store = store or default_store()
    tokens = ServerTokens(store, name, config.url)
    await tokens.clear_tokens()  # keep the registration: a new login reuses it
    provider = await oauth_for(name, config, mode=mode, store=store, announce=announce)
    transport = config_transport(config, name=name, log=log, stderr_tail=deque(), auth=provider)
    with anyio.fail_after(_LOGIN_SECONDS):
        async with Client(transport, mode=_MODES[config.protocol], cache=None) as client:
            listed = await client.list_tools()
    if not provider.authorized:
        raise ConfigError(f"MCP server {name!r} did not ask for authorisation")
    return (await status(name, config, store=store)), len(listed.tools)


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


async def logout(name: str, config: McpServerConfig, *, store: TokenStore | None = None) -> bool:
    """Forget the server's tokens and registration; True if anything was stored."""
    config = _oauth_config(name, config)
    assert config.url is not None
    return await ServerTokens(store or default_store(), name, config.url).forget()
