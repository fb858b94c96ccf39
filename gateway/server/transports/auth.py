"""Serving as an OAuth 2.1 resource server (`[gateway.oauth]`): who may call, and what.

- Protected resource metadata (RFC 9728) at the path-based and root well-known URLs, naming
  the configured authorization servers; a 401 points at it (`resource_metadata`).
- `OAuthTokens` (`oauth_tokens`) verifies a bearer token: a JWT by its issuer's keys, an
  opaque one by introspection. The token itself is kept nowhere and never passed on.
- `ScopePolicy` maps the token's scopes to the agents and exposed nodes it may call (what
  reads resources or prompts, a 2026-07-28 listen stream following them too, needs a `*`
  scope): other tools are not listed (`scope_guard`) and a call to one is refused, naming
  the scope that would allow it: over HTTP with a 403 `insufficient_scope` challenge a
  client can step up from (`challenges`), else as an MCP error (`scope_guard`). The run
  handles (`get_run`, `approve_run`, `deny_run`) and MCP tasks (`tasks/*`) go with the
  agents: any client that may call one may use them, on its own runs only.
- `authenticated_subject()` says who is calling, one identity per caller across kinds of
  credential and issuers (`oauth_caller`): a static token's label (its name, or `token-<hex>`:
  `static_tokens`), an OAuth token's
  `<issuer>#<sub>`, or `<issuer>#client:<client_id>` for a token naming no subject. Run
  ownership, tasks, run handles, chat memory keys and approvals' `by` are keyed by it.

Static tokens (`tokens_env`) keep working beside OAuth, with full access.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from mcp.server.auth.handlers.metadata import ProtectedResourceMetadataHandler
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.routes import build_resource_metadata_url, cors_middleware
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.auth import ProtectedResourceMetadata
from mcp.shared.exceptions import MCPError
from pydantic import AnyHttpUrl, BaseModel
from starlette.routing import Route

from toolkits import error_result

from ...catalog import echoed
from ...engine import Gateway
from ...resource_server import ALL_NODES, ResourceServerSettings
from ..wire_results import tool_result_for
from .oauth_tokens import CALLER_CLAIM, OAUTH_CLAIM, OAuthTokens, oauth_caller

__all__ = [
    "OAUTH_CLAIM",
    "AnyOf",
    "OAuthTokens",
    "ScopePolicy",
    "ScopeRefusal",
    "authenticated_subject",
    "metadata_routes",
    "oauth_caller",
    "resource_metadata_url",
    "scope_guard",
]

log = logging.getLogger(__name__)


def resource_metadata_url(settings: ResourceServerSettings) -> str:
    return str(build_resource_metadata_url(AnyHttpUrl(settings.resource)))


def metadata_routes(settings: ResourceServerSettings) -> list[Route]:
    """The protected resource metadata, at the path-based URL and the root one."""
    scopes = sorted({*settings.required_scopes, *settings.scopes})
    metadata = ProtectedResourceMetadata.model_validate(
        {
            "resource": settings.resource,
            "authorization_servers": settings.authorization_servers,
            "scopes_supported": scopes or None,
            "resource_name": "agent-gateway",
        }
    )
    endpoint = cors_middleware(
        ProtectedResourceMetadataHandler(metadata).handle, ["GET", "OPTIONS"]
    )
    paths = dict.fromkeys(
        [_path(resource_metadata_url(settings)), "/.well-known/oauth-protected-resource"]
    )
    return [Route(path, endpoint=endpoint, methods=["GET", "OPTIONS"]) for path in paths]


def _path(url: str) -> str:
    return "/" + url.split("/", 3)[3] if url.count("/") >= 3 else "/"


@dataclass
class AnyOf:
    """A `TokenVerifier` trying several in turn; static tokens get the required scopes."""

    verifiers: Sequence[TokenVerifier]
    static_scopes: list[str]

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self.verifiers:
            access = await verifier.verify_token(token)
            if access is not None:
                if not (access.claims or {}).get(OAUTH_CLAIM):
                    access = access.model_copy(update={"scopes": list(self.static_scopes)})
                return access
        return None


def authenticated_subject() -> str | None:
    """Who is calling: an OAuth token's caller (`oauth_caller`), a static token's label
    (`static_tokens`), or None when no token was checked."""
    access = get_access_token()
    if access is None:
        return None
    claims = access.claims or {}
    if claims.get(OAUTH_CLAIM):
        return str(claims[CALLER_CLAIM])
    return access.client_id


@dataclass(frozen=True, slots=True)
class ScopeRefusal:
    """Why a token may not make a request, and the scopes that would let it (none: no scope
    would, so a new token cannot help)."""

    message: str
    would_allow: tuple[str, ...]

    def challenge_scopes(self, settings: ResourceServerSettings, access: AccessToken) -> str:
        """What a 403 asks for: the required scopes, those held, and the narrowest that would
        allow the request (held scopes stay named, so a client's new grant keeps them)."""
        wanted = [*settings.required_scopes, *access.scopes, *self.would_allow[:1]]
        return " ".join(dict.fromkeys(wanted))


@dataclass(frozen=True)
class ScopePolicy:
    """What an OAuth token's scopes let it call (`[gateway.oauth.scopes]`)."""

    settings: ResourceServerSettings
    gateway: Gateway
    run_tools: frozenset[str] = frozenset()
    """The tools of served stored runs (`get_run`, ...), of no node: any client that may call
    an agent may use them, as the MCP tasks of agent calls (`tasks/*`); each checks that the
    run is the caller's own."""

    @staticmethod
    def restricts(access: AccessToken | None) -> bool:
        """Whether `access` is an OAuth token (static tokens are the operator's: unrestricted)."""
        return access is not None and bool((access.claims or {}).get(OAUTH_CLAIM))

    def granted(self, access: AccessToken) -> frozenset[str] | None:
        """The agents and nodes `access` may call; None: everything."""
        return self.settings.nodes_granted(access.scopes)

    async def node_of(self, tool: str) -> str | None:
        """The agent or node serving `tool`; None when the gateway knows no such tool."""
        if tool in self.gateway.agents:
            return tool
        found = (await self.gateway.list_tools()).get(tool)
        return found.source_node if found is not None else None

    async def may_call(self, granted: frozenset[str], tool: str) -> bool:
        """Whether a client granted `granted` may call (and is shown) `tool`."""
        if tool in self.run_tools:
            return self._calls_an_agent(granted)
        return await self.node_of(tool) in granted

    def _calls_an_agent(self, granted: frozenset[str]) -> bool:
        return any(agent in granted for agent in self.gateway.agents)

    async def refusal(
        self, access: AccessToken, method: str, params: Mapping[str, Any] | None
    ) -> ScopeRefusal | None:
        """Why `access` may not make this request, or None if it may (`tools/list` is
        filtered, not refused)."""
        granted = self.granted(access)
        if granted is None:
            return None
        held = " ".join(access.scopes) or "none"
        name = str((params or {}).get("name", "")) if method == "tools/call" else ""
        if name in self.run_tools or method.startswith("tasks/"):
            if self._calls_an_agent(granted):
                return None
            allow = self._narrowest(*self.gateway.agents)
            needed = " or ".join(allow) or "none configured"
            what = f"calling {echoed(name)}" if name else method
            return ScopeRefusal(
                f"not allowed: {what} needs a scope granting an agent: {needed} "
                f"(the token has: {held})",
                allow,
            )
        if method == "tools/call":
            node = await self.node_of(name)
            if node is not None and node in granted:
                return None
            # An unknown tool: only a scope granting everything would reach it.
            allow = self._narrowest(node if node is not None else ALL_NODES)
            needed = " or ".join(allow) or "none configured"
            return ScopeRefusal(
                f"not allowed: calling {echoed(name)} needs the scope {needed} "
                f"(the token has: {held})",
                allow if node is not None else (),
            )
        if method.startswith(("resources/", "prompts/", "completion/")):
            allow = self._narrowest(ALL_NODES)
            return ScopeRefusal(f"not allowed: {method} needs a scope granting '*'", allow)
        if method == "subscriptions/listen" and _listens_beyond_tools(params):
            allow = self._narrowest(ALL_NODES)
            return ScopeRefusal(
                f"not allowed: {method} for resources or prompts needs a scope granting '*'",
                allow,
            )
        return None

    def _narrowest(self, *nodes: str) -> tuple[str, ...]:
        """The scopes that would allow one of `nodes`, those granting the fewest nodes first."""
        scopes = self.settings.scopes

        def breadth(scope: str) -> tuple[int, str]:
            granted = scopes[scope]
            return (len(scopes) + 1 if ALL_NODES in granted else len(granted), scope)

        found = {scope for node in nodes for scope in self.settings.scopes_for(node)}
        return tuple(sorted(found, key=breadth))


def _listens_beyond_tools(params: Mapping[str, Any] | None) -> bool:
    """Whether a `subscriptions/listen` asks for more than tool list changes: resources'
    updates or list changes, prompts' list changes, or what this gateway does not know (an
    extension's key). A listen stream follows resources as `resources/read` reads them."""
    wanted: Any = (params or {}).get("notifications")
    if not isinstance(wanted, dict):
        return False  # not a listen request the server takes: it answers the error
    asked = {key for key, value in cast(dict[str, Any], wanted).items() if value}
    return not asked <= {"toolsListChanged"}


def scope_guard(policy: ScopePolicy, stamp: Callable[[], dict[str, Any]]) -> Any:
    """Server middleware: an OAuth client sees and calls only what its scopes grant.

    Over HTTP, a refusal a new token could lift is answered before this, with a 403 the
    client can step up from (`challenges`); this answers the rest as MCP errors: a tool the
    gateway does not know, or one no configured scope grants (an error result shaped as the
    session's others, `stamp` giving the server's `serverInfo`).
    """

    async def guard(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        access = get_access_token()
        if access is None or not policy.restricts(access):
            return await call_next(ctx)
        granted = policy.granted(access)
        if granted is None:
            return await call_next(ctx)
        method = ctx.method
        if method == "tools/list":
            result = await call_next(ctx)
            if isinstance(result, BaseModel):  # what the handler returned, or its dump
                result = result.model_dump(by_alias=True, exclude_none=True)
            if isinstance(result, dict):
                listed = cast(list[dict[str, Any]], result.get("tools", []))
                kept = [t for t in listed if await policy.may_call(granted, str(t.get("name")))]
                result = {**result, "tools": kept}
            return result
        refused = await policy.refusal(access, method, ctx.params)
        if refused is None:
            return await call_next(ctx)
        if method == "tools/call":
            return tool_result_for(error_result(refused.message), ctx.protocol_version, stamp)
        raise MCPError(types.INVALID_REQUEST, refused.message)

    return guard
