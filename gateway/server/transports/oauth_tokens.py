"""Checking an OAuth access token (`OAuthTokens`), and who it says is calling (`oauth_caller`).

- A JWT by its signature (the issuer's JWKS, fetched from its metadata or `jwks_uri`, kept an
  hour, refetched for a key ID it lacks, or after a failed fetch, at most once a minute per
  issuer; a fetch that fails is a WARNING, and its tokens are answered 503 meanwhile), `iss`
  (one of the configured servers), `aud` (this gateway's `resource`), `exp`/`nbf`/`iat`.
  Only a fetch waits for a fetch: a token whose key is known is checked at once, also while
  the issuer's keys are being fetched again, and a fetch gives up after `fetch_seconds`. A
  key ID is refused only when keys fetched since its token came lack it: else (keys fetched
  before it came, not yet to be fetched again) the token may be signed by a key rotated in
  since, and is answered 503 until they may be.
- An opaque token by introspection (RFC 7662) on one HTTP client, with the same audience and
  time rules (`exp`, `nbf`, `iat`). Either must be an access token: one its issuer says is
  a refresh or ID token (`_an_access_token`) is refused. Answers are kept a while (RFC 7662 §4 allows it), keyed
  by the token's digest: an active token's up to a minute (never past its `exp`), an
  inactive one's 10 s, at most `introspections_kept` of them.

The token itself is kept nowhere and never passed on: downstream servers get the gateway's
own credentials.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast

import anyio
import httpx2
import jwt
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.server.auth.provider import AccessToken
from starlette.authentication import AuthenticationError

from toolkits.mcp.config import secret_from_env

from ...resource_server import ResourceServerSettings

__all__ = [
    "CALLER_CLAIM",
    "OAUTH_CLAIM",
    "IssuerUnreachable",
    "KeyNotFetchedYet",
    "OAuthTokens",
    "TokenUnchecked",
    "oauth_caller",
]

OAUTH_CLAIM = "agent-gateway/oauth"
"""Set in the claims of a token verified here (static tokens lack it: they are unrestricted)."""
CALLER_CLAIM = "agent-gateway/caller"
"""In the claims of a token verified here: who is calling (`oauth_caller`)."""

_KEYS_TTL = 3600.0
_ACTIVE_KEPT_SECONDS = 60.0
_INACTIVE_KEPT_SECONDS = 10.0

log = logging.getLogger(__name__)


def oauth_caller(issuer: str, subject: str | None, client_id: str | None) -> str:
    """The identity of an OAuth token's caller: `<issuer>#<sub>`, or `<issuer>#client:<id>`
    for a token naming no subject (a client acting for itself).

    Always qualified by the issuer: two identity providers may each have an `alice`. `%` and
    `:` in a subject are escaped (`%25`, `%3A`), so no subject spells a client's identity
    (`client:svc`); an issuer is an http(s) URL without `#` (`ResourceServerSettings`), so no
    identity spells another issuer's, nor a static token's label (no `#`). ValueError for
    a token naming neither: it would share one identity with every other such token."""
    bare = issuer.rstrip("/")
    if subject:
        return f"{bare}#{subject.replace('%', '%25').replace(':', '%3A')}"
    if client_id:
        return f"{bare}#client:{client_id}"
    raise ValueError("the token names neither a subject (sub) nor a client (client_id)")


class TokenUnchecked(AuthenticationError):
    """A token that could not be checked now. Answered 503 with `Retry-After: retry_after`
    (`challenges.unchecked_token`), not 401: the token may be good, and a client told
    `invalid_token` would throw it away.

    TokenUnchecked
    ├── IssuerUnreachable: its issuer's keys could not be fetched, or its introspection
    │   endpoint did not answer
    └── KeyNotFetchedYet: its key ID is not among its issuer's keys as fetched before it came
    """

    def __init__(self, message: str, retry_after: int = 30) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        """Seconds until the check may succeed."""


class IssuerUnreachable(TokenUnchecked):
    """A token's issuer's keys could not be fetched, or its introspection endpoint did not
    answer."""


class KeyNotFetchedYet(TokenUnchecked):
    """A JWT's key ID is not among its issuer's keys as last fetched, before the token came,
    and they may not be fetched again yet (`refetch_after`): the issuer may have rotated the
    key in since."""


@dataclass
class _IssuerKeys:
    """An issuer's signing keys as last fetched, and the lock only a fetch takes."""

    keys: jwt.PyJWKSet | None = None
    fetched: float = 0.0
    """When the fetch that brought `keys` began (monotonic)."""
    tried: float | None = None
    """When a fetch last began (monotonic), whether or not keys came of it."""
    fetching: anyio.Lock = field(default_factory=anyio.Lock)


@dataclass
class _Introspected:
    answer: dict[str, Any]
    until: float
    """Kept until then (`OAuthTokens.now`)."""


@dataclass
class OAuthTokens:
    """A `TokenVerifier` for the configured authorization servers' access tokens. While
    `running()`, its requests share one HTTP client (else each opens its own)."""

    settings: ResourceServerSettings
    refetch_after: float = 60.0
    """An unknown key ID refetches an issuer's keys, but not more often than this."""
    fetch_seconds: float = 5.0
    """How long a fetch of an issuer's keys (its metadata, then the JWKS) may take."""
    introspections_kept: int = 4096
    http_seconds: float = 10.0
    """How long one request to an issuer (metadata, JWKS, introspection) may take."""
    now: Callable[[], float] = time.time
    """The clock deciding how long an introspection answer is kept."""
    _keys: dict[str, _IssuerKeys] = field(default_factory=dict[str, _IssuerKeys])
    _introspections: dict[str, _Introspected] = field(default_factory=dict[str, _Introspected])
    _http: httpx2.AsyncClient | None = None

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        async with httpx2.AsyncClient(timeout=self.http_seconds) as http:
            self._http = http
            try:
                yield
            finally:
                self._http = None

    @asynccontextmanager
    async def _client(self) -> AsyncGenerator[httpx2.AsyncClient]:
        if self._http is not None:
            yield self._http
        else:
            async with httpx2.AsyncClient(timeout=self.http_seconds) as http:
                yield http

    async def verify_token(self, token: str) -> AccessToken | None:
        """The token's access, or None (401) when it is not valid here. Raises
        `TokenUnchecked` (503) when it could not be checked now; no other failure escapes,
        which would be a 500 with a traceback."""
        try:
            if token.count(".") == 2:
                claims = await self._verified_jwt(token)
            elif self.settings.introspection_endpoint is not None:
                claims = await self._introspected(token)
            else:
                log.info("refused a bearer token: not a JWT, and no introspection endpoint")
                return None
            _an_access_token(claims)
            return self._access(token, claims)
        except TokenUnchecked as exc:  # an issuer unreachable is said at WARNING where it failed
            log.info("could not check a bearer token: %s", exc)
            raise
        except (jwt.PyJWTError, httpx2.HTTPError, ValueError, KeyError) as exc:
            log.info("refused a bearer token: %s", exc)  # the reason, never the token
            return None
        except Exception as exc:  # what nothing above foresaw: refused, in one line
            log.warning("refused a bearer token: its check failed: %s: %s", type(exc).__name__, exc)
            return None

    def _access(self, token: str, claims: dict[str, Any]) -> AccessToken:
        scopes = _scopes(claims)
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
            token="sha256:" + _digest(token)[:16],
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

    def _issuer(self, claimed: object) -> str:
        for issuer in self.settings.authorization_servers:
            if isinstance(claimed, str) and claimed.rstrip("/") == issuer.rstrip("/"):
                return issuer
        raise ValueError(f"issuer {claimed!r} is not one of the configured authorization servers")

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

    async def _key(self, issuer: str, kid: str | None) -> jwt.PyJWK:
        keys = self._keys.setdefault(issuer, _IssuerKeys())
        asked = time.monotonic()
        if keys.fetching.locked():
            key = _find(keys.keys, kid)
            if key is not None:  # known: no waiting for the fetch under way
                return key
        elif not self._fetch_due(keys, kid, asked):
            return self._known(keys, issuer, kid, asked)
        async with keys.fetching:  # one fetch per issuer at a time
            if self._fetch_due(keys, kid, asked):
                await self._refetch(keys, issuer)
        return self._known(keys, issuer, kid, asked)

    def _known(self, keys: _IssuerKeys, issuer: str, kid: str | None, asked: float) -> jwt.PyJWK:
        """The key `kid` among the issuer's keys held, for a token that came at `asked`."""
        key = _find(keys.keys, kid)
        if key is not None:
            return key
        now = time.monotonic()
        tried = keys.tried if keys.tried is not None else now
        wait = max(1, math.ceil(self.refetch_after - (now - tried)))
        if keys.keys is None:
            raise IssuerUnreachable(
                f"the signing keys of {issuer} could not be fetched", retry_after=wait
            )
        if kid is None:  # no fetch could tell which key it is
            raise ValueError("the token names no key ID, and its issuer has not one key")
        if keys.fetched >= asked:  # the issuer's keys as of after the token came
            raise ValueError(f"no signing key {kid!r} in the issuer's JWKS")
        if keys.tried is not None and keys.tried > keys.fetched:
            raise IssuerUnreachable(
                f"the signing keys of {issuer} could not be fetched again, and those held"
                f" lack key {kid!r}",
                retry_after=wait,
            )
        raise KeyNotFetchedYet(
            f"signing key {kid!r} is not among the keys of {issuer} fetched"
            f" {now - keys.fetched:.0f} s ago; they may be fetched again in {wait} s",
            retry_after=wait,
        )

    def _fetch_due(self, keys: _IssuerKeys, kid: str | None, asked: float) -> bool:
        """Whether a request for `kid` that began at `asked` should fetch the issuer's keys:
        not when a fetch began since (it waited for that one); else at most once per
        `refetch_after`, when there are none (the last fetch failed too: a token naming an
        issuer that is down costs it nothing more, whoever mints them), or when they are an
        hour old or lack `kid`. Keys kept past the hour serve while their issuer cannot be
        reached."""
        now = time.monotonic()
        if keys.tried is not None and keys.tried >= asked:
            return False
        if keys.tried is not None and now - keys.tried <= self.refetch_after:
            return False
        if keys.keys is None:
            return True
        return now - keys.fetched > _KEYS_TTL or _find(keys.keys, kid) is None

    async def _refetch(self, keys: _IssuerKeys, issuer: str) -> None:
        """Fetch the issuer's keys; a fetch that fails or does not come keeps those held."""
        began = keys.tried = time.monotonic()
        try:
            with anyio.move_on_after(self.fetch_seconds) as waited:
                keys.keys = await self._fetch_keys(issuer)
                keys.fetched = began
        except (httpx2.HTTPError, jwt.PyJWTError, ValueError, KeyError) as exc:
            log.warning("the signing keys of %s could not be fetched: %s", issuer, _reason(exc))
            return
        if waited.cancelled_caught:
            log.warning(
                "the signing keys of %s did not come within %g s", issuer, self.fetch_seconds
            )

    async def _fetch_keys(self, issuer: str) -> jwt.PyJWKSet:
        async with self._client() as http:
            uri = self.settings.jwks_uri or await _jwks_uri(http, issuer)
            response = await http.get(uri)
            response.raise_for_status()
            return jwt.PyJWKSet.from_dict(response.json())

    # Opaque tokens

    async def _introspected(self, token: str) -> dict[str, Any]:
        settings = self.settings
        claims = await self._introspection(token)
        if claims.get("active") is not True:
            raise ValueError("the introspection endpoint says the token is not active")
        _in_force(claims, self.now(), settings.leeway)
        if "iss" in claims:
            self._issuer(claims["iss"])
        named = _strings(claims.get("aud"), "aud")
        if not set(named) & set(_audiences(settings.resource)):
            raise ValueError(f"the token is for {named or 'no audience'}, not this gateway")
        return claims

    async def _introspection(self, token: str) -> dict[str, Any]:
        """The introspection endpoint's answer about `token`, asked or as kept."""
        digest = _digest(token)
        now = self.now()
        kept = self._introspections.get(digest)
        if kept is not None and now < kept.until:
            return kept.answer
        answer = await self._ask_introspection(token)
        if answer.get("active") is True:
            exp = answer.get("exp")
            left = exp - now if _is_number(exp) else _ACTIVE_KEPT_SECONDS
            until = now + min(left, _ACTIVE_KEPT_SECONDS)
        else:
            until = now + _INACTIVE_KEPT_SECONDS
        self._keep(digest, _Introspected(answer, until), now)
        return answer

    def _keep(self, digest: str, introspected: _Introspected, now: float) -> None:
        kept = self._introspections
        kept.pop(digest, None)
        if introspected.until <= now:
            return
        if len(kept) >= self.introspections_kept:
            for stale in [d for d, k in kept.items() if k.until <= now]:
                del kept[stale]
        while len(kept) >= self.introspections_kept:
            del kept[next(iter(kept))]  # the one kept longest
        kept[digest] = introspected

    async def _ask_introspection(self, token: str) -> dict[str, Any]:
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
        form = {"token": token, "token_type_hint": "access_token"}
        endpoint = settings.introspection_endpoint
        try:
            async with self._client() as http:
                if auth is None:
                    response = await http.post(endpoint, data=form)
                else:
                    response = await http.post(endpoint, data=form, auth=auth)
        except httpx2.TransportError as exc:
            if isinstance(exc, httpx2.ConnectTimeout):
                why = f"could not be reached: no connection within {self.http_seconds:g} s"
            elif isinstance(exc, httpx2.TimeoutException):
                why = f"did not answer within {self.http_seconds:g} s"
            else:
                why = f"could not be reached: {_reason(exc)}"
            log.warning("the introspection endpoint %s %s", endpoint, why)
            raise IssuerUnreachable(f"the introspection endpoint {why}") from exc
        if response.status_code >= 500:
            log.warning("the introspection endpoint %s answered %d", endpoint, response.status_code)
            raise IssuerUnreachable(f"the introspection endpoint answered {response.status_code}")
        response.raise_for_status()
        answer: Any = response.json()
        if not isinstance(answer, dict):
            raise ValueError("the introspection endpoint's answer is not a JSON object")
        return cast(dict[str, Any], answer)


def _is_number(value: object) -> TypeGuard[int | float]:
    """A finite number: JSON's NaN and Infinity (which `json` reads) would be a time never
    past nor to come, a token in force for ever."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _in_force(claims: Mapping[str, Any], now: float, leeway: float) -> None:
    """ValueError unless an introspection answer's times hold at `now`, by the rules PyJWT
    applies to a JWT's (`exp` past, `nbf` or `iat` to come, each with `leeway`). A time that
    is no number is a refusal: never taken as "no such time"."""
    times: dict[str, float] = {}
    for claim in ("exp", "nbf", "iat"):
        value = claims.get(claim)
        if value is not None and not _is_number(value):
            raise ValueError(f"the introspection answer's {claim} is not a number: {value!r:.40}")
        if value is not None:
            times[claim] = value
    if "exp" in times and times["exp"] + leeway < now:
        raise ValueError("the token has expired")
    for claim in ("nbf", "iat"):
        if claim in times and times[claim] - leeway > now:
            raise ValueError(f"the token is not yet valid ({claim})")


_NOT_ACCESS_TOKENS = frozenset(
    {
        "refresh_token",
        "urn:ietf:params:oauth:token-type:refresh_token",  # RFC 8693 §3
        "urn:ietf:params:oauth:token-type:id_token",
        "refresh",  # Keycloak's typ (and "offline", "id"), Cognito's token_use ("id")
        "offline",
        "id",
        "id_token",
    }
)


def _an_access_token(claims: Mapping[str, Any]) -> None:
    """ValueError when a token's introspection answer or claims say it is another kind (a
    refresh token, an ID token): its issuer vouches for it, but it grants no access. RFC
    7662 names the kind `token_type`; Ory Hydra and Cognito `token_use`, Keycloak `typ`."""
    for claim in ("token_type", "token_use", "typ"):
        kind = claims.get(claim)
        if isinstance(kind, str) and kind.strip().lower() in _NOT_ACCESS_TOKENS:
            raise ValueError(f"the token is not an access token ({claim}: {kind:.60})")


def _strings(value: object, claim: str) -> list[str]:
    """A claim that is a string or a list of strings, as a list (none: [])."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in cast(list[Any], value)):
        return cast(list[str], value)
    raise ValueError(f"the token's {claim} is not a string or a list of strings")


def _scopes(claims: Mapping[str, Any]) -> list[str]:
    """`scope` (space-separated, RFC 8693/9068) or `scp` (a list, as Azure and Okta send)."""
    scope: object = claims.get("scope", claims.get("scp"))
    if isinstance(scope, str):
        return scope.split()
    return _strings(scope, "scope")


async def _jwks_uri(http: httpx2.AsyncClient, issuer: str) -> str:
    """The `jwks_uri` of the issuer's metadata (RFC 8414, else OpenID discovery). ValueError
    saying what each place answered when none names one: missing (404, or no `jwks_uri`) or
    not to be had (any other answer: the issuer may be down)."""
    answers: list[str] = []
    missing = True
    for url in build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer):
        response = await http.get(url)
        if response.status_code != 200:
            answers.append(f"{url} answered {response.status_code}")
            missing = missing and response.status_code == 404
            continue
        try:
            document: Any = response.json()
        except ValueError:
            document = None
        uri = cast(dict[str, Any], document).get("jwks_uri") if isinstance(document, dict) else None
        if isinstance(uri, str):
            return uri
        answers.append(f"{url} names no jwks_uri")
    said = "; ".join(answers)
    if missing:
        raise ValueError(
            f"the metadata of {issuer} names no jwks_uri ({said}; set [gateway.oauth] jwks_uri)"
        )
    raise ValueError(f"the metadata of {issuer} could not be fetched ({said})")


def _reason(exc: BaseException) -> str:
    """What went wrong, never empty: some of httpx's errors say nothing (`ReadTimeout`)."""
    return str(exc) or type(exc).__name__


def _find(keys: jwt.PyJWKSet | None, kid: str | None) -> jwt.PyJWK | None:
    if keys is None:
        return None
    if kid is None:
        return keys.keys[0] if len(keys.keys) == 1 else None
    return next((key for key in keys.keys if key.key_id == kid), None)


def _audiences(resource: str) -> list[str]:
    bare = resource.rstrip("/")
    return [bare, f"{bare}/"]


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
