"""Serving as an OAuth 2.1 resource server (`[gateway.oauth]`): who may call, and what.

- Protected resource metadata (RFC 9728) at the path-based and root well-known URLs, naming
  the configured authorization servers; a 401 points at it (`resource_metadata`).
- `OAuthTokens` verifies a bearer token: a JWT by its signature (the issuer's JWKS, fetched
  from its metadata or `jwks_uri`, cached, refetched once for an unknown key), `iss` (one of
  the configured servers), `aud` (this gateway's `resource`), `exp`/`nbf`; an opaque token by
  introspection (RFC 7662), with the same audience and expiry rules. The token itself is kept
  nowhere and never passed on: downstream servers get the gateway's own credentials.
- `scope_guard` maps the token's scopes to the agents and exposed nodes it may call: other
  tools are not listed and a call to one is refused, naming the scope that would allow it.
- `authenticated_subject()` says who is calling (the token's `sub`, or a static token's
  label), for the run's record and its trace.

Static tokens (`tokens_env`) keep working beside OAuth, with full access.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Sequence
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

from ..engine import Gateway
from ..resource_server import ResourceServerSettings

__all__ = [
    "OAUTH_CLAIM",
    "AnyOf",
    "OAuthTokens",
    "authenticated_subject",
    "metadata_routes",
    "resource_metadata_url",
    "scope_guard",
]

OAUTH_CLAIM = "agent-gateway/oauth"
"""Set in the claims of a token verified here (static tokens lack it: they are unrestricted)."""

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
        except (jwt.PyJWTError, httpx2.HTTPError, ValueError, KeyError) as exc:
            log.info("refused a bearer token: %s", exc)  # the reason, never the token
            return None
        if claims is None:
            return None
        return self._access(token, claims)

    def _access(self, token: str, claims: dict[str, Any]) -> AccessToken | None:
        scope: Any = claims.get("scope", claims.get("scp", ""))
        scopes = scope.split() if isinstance(scope, str) else [str(s) for s in scope]
        subject = claims.get("sub")
        client = claims.get("client_id") or claims.get("azp") or subject or "unknown"
        exp = claims.get("exp")
        return AccessToken(
            # Only a digest: the token itself is kept nowhere.
            token="sha256:" + hashlib.sha256(token.encode()).hexdigest()[:16],
            client_id=str(client),
            scopes=scopes,
            expires_at=int(exp) if isinstance(exp, int | float) else None,
            resource=self.settings.resource,
            subject=str(subject) if subject is not None else None,
            claims={"iss": claims.get("iss"), OAUTH_CLAIM: True},
        )

    # JWTs

    async def _verified_jwt(self, token: str) -> dict[str, Any] | None:
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

    async def _introspected(self, token: str) -> dict[str, Any] | None:
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


def authenticated_subject() -> str | None:
    """Who is calling: the OAuth subject (or client), a static token's label, or None."""
    access = get_access_token()
    if access is None:
        return None
    if (access.claims or {}).get(OAUTH_CLAIM):
        return access.subject or f"client:{access.client_id}"
    return access.client_id


def scope_guard(settings: ResourceServerSettings, gateway: Gateway) -> Any:
    """Server middleware: an OAuth client sees and calls only what its scopes grant."""

    async def node_of(tool: str) -> str:
        if tool in gateway.agents:
            return tool
        found = (await gateway.list_tools()).get(tool)
        return found.source_node if found is not None else tool

    async def guard(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        access = get_access_token()
        if access is None or not (access.claims or {}).get(OAUTH_CLAIM):
            return await call_next(ctx)
        granted = settings.nodes_granted(access.scopes)
        if granted is None:
            return await call_next(ctx)
        method = ctx.method
        if method == "tools/list":
            result = await call_next(ctx)
            if isinstance(result, BaseModel):  # what the handler returned, or its dump
                result = result.model_dump(by_alias=True, exclude_none=True)
            if isinstance(result, dict):
                listed = cast(list[dict[str, Any]], result.get("tools", []))
                kept = [t for t in listed if await node_of(str(t.get("name"))) in granted]
                result = {**result, "tools": kept}
            return result
        if method == "tools/call":
            name = str((ctx.params or {}).get("name", ""))
            node = await node_of(name)
            if node not in granted:
                needed = " or ".join(settings.scopes_for(node)) or "none configured"
                return error_result(
                    f"not allowed: calling {name!r} needs the scope {needed} "
                    f"(the token has: {' '.join(access.scopes) or 'none'})"
                )
        elif method.startswith(("resources/", "prompts/", "completion/")):
            raise MCPError(
                types.INVALID_REQUEST,
                f"not allowed: {method} needs a scope granting '*'",
            )
        return await call_next(ctx)

    return guard
