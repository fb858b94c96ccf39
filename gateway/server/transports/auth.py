"""Serving as an OAuth 2.1 resource server (`[gateway.oauth]`): who may call, and what.

- Protected resource metadata (RFC 9728) at the path-based and root well-known URLs, naming
  the configured authorization servers; a 401 points at it (`resource_metadata`).
- `OAuthTokens` verifies a bearer token: a JWT by its signature (the issuer's JWKS, fetched
  from its metadata or `jwks_uri`, cached, refetched once for an unknown key), `iss` (one of
  the configured servers), `aud` (this gateway's `resource`), `exp`/`nbf`; an opaque token by
  introspection (RFC 7662), with the same audience and expiry rules. The token itself is kept
  nowhere and never passed on: downstream servers get the gateway's own credentials.
- `ScopePolicy` maps the token's scopes to the agents and exposed nodes it may call: other
  tools are not listed (`scope_guard`) and a call to one is refused, naming the scope that
  would allow it: over HTTP with a 403 `insufficient_scope` challenge a client can step up
  from (`challenges`), else as an MCP error (`scope_guard`). The run handles (`get_run`,
  `approve_run`, `deny_run`) and MCP tasks (`tasks/*`) go with the agents: any client that
  may call one may use them, on its own runs only.
- `authenticated_subject()` says who is calling, one identity per caller across kinds of
  credential and issuers (`oauth_caller`): a static token's label `token-N`, an OAuth token's
  `<issuer>#<sub>`, or `<issuer>#client:<client_id>` for a token naming no subject. Run
  ownership, tasks, run handles, chat memory keys and approvals' `by` are keyed by it.

Static tokens (`tokens_env`) keep working beside OAuth, with full access.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
import httpx2
import jwt
import mcp_types as types
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
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
from toolkits.mcp.config import secret_from_env

from ...engine import Gateway
from ...resource_server import ALL_NODES, ResourceServerSettings
from ..wire_results import tool_result_for

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

OAUTH_CLAIM = "agent-gateway/oauth"
"""Set in the claims of a token verified here (static tokens lack it: they are unrestricted)."""
CALLER_CLAIM = "agent-gateway/caller"
"""In the claims of a token verified here: who is calling (`oauth_caller`)."""

_FETCH_SECONDS = 10.0
_KEYS_TTL = 3600.0
_REFETCH_AFTER = 60.0
"""An unknown key ID refetches the JWKS, but not more often than this."""

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
class _Keys:
    keys: jwt.PyJWKSet
    fetched: float


@dataclass
class OAuthTokens:
    """A `TokenVerifier` for the configured authorization servers' access tokens."""

    settings: ResourceServerSettings
    _keys: dict[str, _Keys] = field(default_factory=dict[str, _Keys])
    _lock: anyio.Lock = field(default_factory=anyio.Lock)

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            if token.count(".") == 2:
                claims = await self._verified_jwt(token)
            elif self.settings.introspection_endpoint is not None:
                claims = await self._introspected(token)
            else:
                log.info("refused a bearer token: not a JWT, and no introspection endpoint")
                return None
            return self._access(token, claims)
        except (jwt.PyJWTError, httpx2.HTTPError, ValueError, KeyError) as exc:
            log.info("refused a bearer token: %s", exc)  # the reason, never the token
            return None

    def _access(self, token: str, claims: dict[str, Any]) -> AccessToken:
        scope: Any = claims.get("scope", claims.get("scp", ""))
        scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope]
        subject = claims.get("sub")
        named_client = claims.get("client_id") or claims.get("azp")
        caller = oauth_caller(
            self._issuer_of(claims),
            str(subject) if subject is not None else None,
            str(named_client) if named_client is not None else None,
        )
        client = named_client or subject
        exp = claims.get("exp")
        # The SDK's bearer backend refuses a token past `expires_at` with no leeway (and no
        # log): a token checked here with the leeway must not be refused there without it.
        expires_at = int(exp + self.settings.leeway) if isinstance(exp, int | float) else None
        return AccessToken(
            # Only a digest: the token itself is kept nowhere.
            token="sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16],
            client_id=str(client),
            scopes=scopes,
            expires_at=expires_at,
            resource=self.settings.resource,
            subject=str(subject) if subject is not None else None,
            claims={"iss": claims.get("iss"), OAUTH_CLAIM: True, CALLER_CLAIM: caller},
        )

    def _issuer_of(self, claims: Mapping[str, Any]) -> str:
        """The configured issuer a verified token is of. An introspection answer may name
        none: then the one configured issuer, else the introspection endpoint, a namespace of
        its own (which of several issuers it answers for is not known)."""
        if "iss" in claims:
            return self._issuer(claims["iss"])
        servers = self.settings.authorization_servers
        if len(servers) == 1:
            return servers[0]
        return self.settings.introspection_endpoint or servers[0]

    # JWTs

    async def _verified_jwt(self, token: str) -> dict[str, Any]:
        settings = self.settings
        header = jwt.get_unverified_header(token)
        algorithm = header.get("alg")
        if algorithm not in settings.algorithms:
            raise ValueError(f"signature algorithm {algorithm!r} is not accepted")
        unverified = jwt.decode(token, options={"verify_signature": False})
        issuer = self._issuer(unverified.get("iss"))
        key = await self._key(issuer, header.get("kid"))
        claims: dict[str, Any] = jwt.decode(
            token,
            key=key.key,
            algorithms=[algorithm],
            audience=_audiences(settings.resource),
            issuer=unverified["iss"],
            leeway=settings.leeway,
            options={"require": ["exp", "iss", "aud"]},
        )
        return claims

    def _issuer(self, claimed: object) -> str:
        for issuer in self.settings.authorization_servers:
            if isinstance(claimed, str) and claimed.rstrip("/") == issuer.rstrip("/"):
                return issuer
        raise ValueError(f"issuer {claimed!r} is not one of the configured authorization servers")

    async def _key(self, issuer: str, kid: str | None) -> jwt.PyJWK:
        async with self._lock:  # one fetch at a time; the others wait for its keys
            cached = self._keys.get(issuer)
            now = time.monotonic()
            if cached is None or now - cached.fetched > _KEYS_TTL:
                cached = self._keys[issuer] = _Keys(await self._fetch_keys(issuer), now)
            key = _find(cached.keys, kid)
            if key is None and now - cached.fetched > _REFETCH_AFTER:
                # A key rotated in since we fetched.
                cached = self._keys[issuer] = _Keys(await self._fetch_keys(issuer), now)
                key = _find(cached.keys, kid)
        if key is None:
            raise ValueError(f"no signing key {kid!r} in the issuer's JWKS")
        return key

    async def _fetch_keys(self, issuer: str) -> jwt.PyJWKSet:
        async with httpx2.AsyncClient(timeout=_FETCH_SECONDS) as http:
            uri = self.settings.jwks_uri or await _jwks_uri(http, issuer)
            response = await http.get(uri)
            response.raise_for_status()
            return jwt.PyJWKSet.from_dict(response.json())

    # Opaque tokens

    async def _introspected(self, token: str) -> dict[str, Any]:
        settings = self.settings
        assert settings.introspection_endpoint is not None
        auth: httpx2.BasicAuth | None = None
        if settings.introspection_client_id is not None:
            secret = (
                secret_from_env(
                    settings.introspection_client_secret_env, "the introspection client secret"
                )
                if settings.introspection_client_secret_env
                else ""
            )
            auth = httpx2.BasicAuth(settings.introspection_client_id, secret)
        async with httpx2.AsyncClient(timeout=_FETCH_SECONDS, auth=auth) as http:
            response = await http.post(
                settings.introspection_endpoint,
                data={"token": token, "token_type_hint": "access_token"},
            )
        response.raise_for_status()
        claims = cast(dict[str, Any], response.json())
        if claims.get("active") is not True:
            raise ValueError("the introspection endpoint says the token is not active")
        exp = claims.get("exp")
        if isinstance(exp, int | float) and exp + settings.leeway < time.time():
            raise ValueError("the token has expired")
        if "iss" in claims:
            self._issuer(claims["iss"])
        audiences: Any = claims.get("aud")
        named = [audiences] if isinstance(audiences, str) else list(audiences or [])
        if not set(named) & set(_audiences(settings.resource)):
            raise ValueError(f"the token is for {named or 'no audience'}, not this gateway")
        return claims


async def _jwks_uri(http: httpx2.AsyncClient, issuer: str) -> str:
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
        response = await http.get(url)
        if response.status_code == 200:
            uri = response.json().get("jwks_uri")
            if isinstance(uri, str):
                return uri
    raise ValueError(f"the metadata of {issuer} names no jwks_uri (set [gateway.oauth] jwks_uri)")


def _find(keys: jwt.PyJWKSet, kid: str | None) -> jwt.PyJWK | None:
    if kid is None:
        return keys.keys[0] if len(keys.keys) == 1 else None
    return next((key for key in keys.keys if key.key_id == kid), None)


def _audiences(resource: str) -> list[str]:
    bare = resource.rstrip("/")
    return [bare, f"{bare}/"]


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


def oauth_caller(issuer: str, subject: str | None, client_id: str | None) -> str:
    """The identity of an OAuth token's caller: `<issuer>#<sub>`, or `<issuer>#client:<id>`
    for a token naming no subject (a client acting for itself).

    Always qualified by the issuer: two identity providers may each have an `alice`. `%` and
    `:` in a subject are escaped (`%25`, `%3A`), so no subject spells a client's identity
    (`client:svc`); an issuer is an http(s) URL without `#` (`ResourceServerSettings`), so no
    identity spells another issuer's, nor a static token's label (`token-N`). ValueError for
    a token naming neither: it would share one identity with every other such token."""
    bare = issuer.rstrip("/")
    if subject:
        return f"{bare}#{subject.replace('%', '%25').replace(':', '%3A')}"
    if client_id:
        return f"{bare}#client:{client_id}"
    raise ValueError("the token names neither a subject (sub) nor a client (client_id)")


def authenticated_subject() -> str | None:
    """Who is calling: an OAuth token's caller (`oauth_caller`), a static token's label
    (`token-N`), or None when no token was checked."""
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
            what = f"calling {name!r}" if name else method
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
                f"not allowed: calling {name!r} needs the scope {needed} (the token has: {held})",
                allow if node is not None else (),
            )
        if method.startswith(("resources/", "prompts/", "completion/")):
            allow = self._narrowest(ALL_NODES)
            return ScopeRefusal(f"not allowed: {method} needs a scope granting '*'", allow)
        return None

    def _narrowest(self, *nodes: str) -> tuple[str, ...]:
        """The scopes that would allow one of `nodes`, those granting the fewest nodes first."""
        scopes = self.settings.scopes

        def breadth(scope: str) -> tuple[int, str]:
            granted = scopes[scope]
            return (len(scopes) + 1 if ALL_NODES in granted else len(granted), scope)

        found = {scope for node in nodes for scope in self.settings.scopes_for(node)}
        return tuple(sorted(found, key=breadth))


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
