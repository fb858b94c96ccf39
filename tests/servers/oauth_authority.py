"""A real OAuth 2.1 authorization server for tests, on 127.0.0.1.

It is the mcp SDK's own handlers (authorize, token with PKCE and client authentication,
dynamic registration, revocation; introspection is ours) over `TestAuthority`, a provider that
approves every authorization at once, as a test server must (no person). Its metadata is
served where a test asks: OAuth (RFC 8414) or OpenID discovery, at a root or a path issuer.
Every request it saw is recorded for the tests to assert on.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import urlencode

import anyio
from mcp.server.auth.handlers.authorize import AuthorizationHandler
from mcp.server.auth.handlers.metadata import MetadataHandler
from mcp.server.auth.handlers.register import RegistrationHandler
from mcp.server.auth.handlers.revoke import RevocationHandler
from mcp.server.auth.handlers.token import TokenHandler
from mcp.server.auth.middleware.client_auth import ClientAuthenticator
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    IdentityAssertionParams,
    RefreshToken,
    TokenError,
)
from mcp.server.auth.settings import ClientRegistrationOptions
from mcp.shared.auth import OAuthClientInformationFull, OAuthMetadata, OAuthToken
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from tests.servers.asgi import buffered_body, serve_on_loopback

__all__ = [
    "AuthorityOptions",
    "SeenRequest",
    "TestAuthority",
    "authority_app",
    "serve_authority",
]


@dataclass
class SeenRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int = 0
    """The client's end of the TCP connection: the same on two requests, the same connection."""


@dataclass
class AuthorityOptions:
    issuer_path: str = ""
    """"" for a root issuer, or e.g. "/tenant"."""
    metadata: Literal["oauth", "oidc"] = "oauth"
    registration: bool = True
    client_id_metadata_documents: bool = False
    scopes: list[str] = field(default_factory=lambda: ["read", "write"])
    expires_in: int = 3600
    """What the token responses say; the resource server's own view is `expire_all()`."""
    issue_refresh_tokens: bool = True
    advertise_scopes: bool = True
    withhold: frozenset[str] = frozenset()
    """Scopes never granted, whatever is asked (a step-up that cannot succeed)."""
    revocation: Literal["works", "absent", "broken"] = "works"
    """The revocation endpoint: published and working, not published, or answering 503."""


class TestAuthority:
    """An in-memory authorization server provider that approves at once (subject: alice)."""

    __test__ = False  # not a pytest class

    def __init__(self, options: AuthorityOptions | None = None) -> None:
        self.options = options or AuthorityOptions()
        self.issuer = ""  # set once served
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.metadata_documents: dict[str, OAuthClientInformationFull] = {}
        """Client ID metadata documents the server "fetched", by URL."""
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.authorizations: list[AuthorizationParams] = []
        self.grants: list[str] = []
        self.registrations = 0
        self.revoked: list[str] = []
        """Tokens revoked at the revocation endpoint (RFC 7009), in order."""
        self.token_failure: tuple[int, str] | None = None
        self.token_held: anyio.Event | None = None
        """While set and not yet set off, the token endpoint does not answer (it hangs)."""
        """While set, the token endpoint answers every request so: (status, OAuth error)."""

    # OAuthAuthorizationServerProvider

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        if client_id in self.clients:
            return self.clients[client_id]
        if self.options.client_id_metadata_documents:
            return self.metadata_documents.get(client_id)
        return None

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.registrations += 1
        self.add_client(client_info)

    def add_client(self, client_info: OAuthClientInformationFull) -> None:
        """Register a client (as a person would beforehand), allowed every scope: a step-up
        must not fail on the scope the client happened to register with."""
        every_scope = " ".join(self.options.scopes)
        self.clients[client_info.client_id] = client_info.model_copy(update={"scope": every_scope})

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations.append(params)
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 60,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="alice",
        )
        query = {"code": code, "state": params.state or "", "iss": self.issuer}
        return f"{params.redirect_uri}?{urlencode(query)}"

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        self.grants.append("authorization_code")
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        del self.refresh[refresh_token.token]
        self.grants.append("refresh_token")
        return self._issue(client.client_id, scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.revoked.append(token.token)
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    async def exchange_identity_assertion(
        self, client: OAuthClientInformationFull, params: IdentityAssertionParams
    ) -> OAuthToken:
        raise TokenError(error="unsupported_grant_type")

    # What tests do

    def revoke_all(self) -> None:
        """Every token issued so far stops working (access and refresh)."""
        self.access.clear()
        self.refresh.clear()

    def expire_all(self) -> None:
        """Every access token issued so far is expired (refresh tokens still work)."""
        for token, access in list(self.access.items()):
            self.access[token] = access.model_copy(update={"expires_at": int(time.time()) - 10})

    def issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        """Tokens as a grant would give them (the test skips the grant)."""
        return self._issue(client_id, scopes, resource)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        scopes = [s for s in scopes if s not in self.options.withhold]
        token = secrets.token_urlsafe(24)
        self.access[token] = AccessToken(
            token=token,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + 3600,
            resource=resource,
            subject="alice",
        )
        refresh: str | None = None
        if self.options.issue_refresh_tokens:
            refresh = secrets.token_urlsafe(24)
            self.refresh[refresh] = RefreshToken(
                token=refresh,
                client_id=client_id,
                scopes=scopes,
                resource=resource,
                subject="alice",
            )
        return OAuthToken(
            access_token=token,
            expires_in=self.options.expires_in,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )


class _Recorded:
    """ASGI middleware keeping every HTTP request (method, path, headers, body), and failing
    token requests while the authority says so (`token_failure`), or holding them
    (`token_held`)."""

    def __init__(self, app: ASGIApp, seen: list[SeenRequest], authority: TestAuthority) -> None:
        self.app = app
        self.seen = seen
        self.authority = authority

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        self.seen.append(
            SeenRequest(
                method=scope["method"],
                path=scope["path"],
                headers={k.decode().lower(): v.decode() for k, v in headers},
                body=body,
            )
        )
        held = self.authority.token_held
        if held is not None and scope["path"].endswith("/token"):
            await held.wait()
        failure = self.authority.token_failure
        if failure is not None and scope["path"].endswith("/token"):
            status, error = failure
            await JSONResponse({"error": error}, status_code=status)(scope, replay, send)
            return
        await self.app(scope, replay, send)


def authority_app(authority: TestAuthority, base_url: str, seen: list[SeenRequest]) -> ASGIApp:
    """The authorization server's app; `base_url` is where it is served (`http://127.0.0.1:P`)."""
    options = authority.options
    issuer = f"{base_url}{options.issuer_path}"
    authority.issuer = issuer
    metadata = OAuthMetadata.model_validate(
        {
            "issuer": issuer,  # as a string: the model keeps a root issuer without its "/"
            "authorization_endpoint": f"{issuer}/authorize",
            "token_endpoint": f"{issuer}/token",
            "registration_endpoint": f"{issuer}/register" if options.registration else None,
            "revocation_endpoint": f"{issuer}/revoke" if options.revocation != "absent" else None,
            "scopes_supported": options.scopes if options.advertise_scopes else None,
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": [
                "none",
                "client_secret_basic",
                "client_secret_post",
            ],
            "code_challenge_methods_supported": ["S256"],
            "client_id_metadata_document_supported": options.client_id_metadata_documents or None,
            "authorization_response_iss_parameter_supported": True,
        }
    )
    if options.metadata == "oauth":
        where = f"/.well-known/oauth-authorization-server{options.issuer_path}"
    elif options.issuer_path:
        where = f"{options.issuer_path}/.well-known/openid-configuration"
    else:
        where = "/.well-known/openid-configuration"
    authenticator = ClientAuthenticator(authority)
    prefix = options.issuer_path

    async def introspect(request: Request) -> JSONResponse:
        """RFC 7662, for resource servers taking this server's (opaque) tokens. A refresh
        token is active too, as at most servers, its `token_type` saying what it is."""
        token = str((await request.form()).get("token", ""))
        found = authority.access.get(token) or authority.refresh.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return JSONResponse({"active": False})
        claims = {
            "active": True,
            "token_type": "Bearer" if token in authority.access else "refresh_token",
            "client_id": found.client_id,
            "scope": " ".join(found.scopes),
            "sub": found.subject,
            "aud": found.resource,
            "iss": issuer,
            "exp": found.expires_at,
        }
        return JSONResponse({key: value for key, value in claims.items() if value is not None})

    routes = [
        Route(where, MetadataHandler(metadata).handle, methods=["GET"]),
        Route(f"{prefix}/authorize", AuthorizationHandler(authority).handle, methods=["GET"]),
        Route(f"{prefix}/token", TokenHandler(authority, authenticator).handle, methods=["POST"]),
        Route(
            f"{prefix}/revoke",
            _public_clients_too(RevocationHandler(authority, authenticator).handle)
            if options.revocation == "works"
            else _unavailable,
            methods=["POST"],
        ),
        Route(f"{prefix}/introspect", introspect, methods=["POST"]),
    ]
    if options.registration:
        registration = RegistrationHandler(
            authority, options=ClientRegistrationOptions(enabled=True, valid_scopes=options.scopes)
        )
        routes.append(Route(f"{prefix}/register", registration.handle, methods=["POST"]))
    return _Recorded(Starlette(routes=routes), seen, authority)


def _public_clients_too(
    handle: Callable[[Request], Awaitable[Response]],
) -> Callable[[Request], Awaitable[Response]]:
    """The SDK's revocation handler wants a `client_secret` field even from a public client
    (modelcontextprotocol/python-sdk#3508), which RFC 7009 §5 does not; it gets an empty one."""

    async def endpoint(request: Request) -> Response:
        form = await request.form()
        if "client_secret" in form:
            return await handle(request)
        body = urlencode([*form.multi_items(), ("client_secret", "")]).encode()

        async def receive() -> Message:
            return {"type": "http.request", "body": body, "more_body": False}

        return await handle(Request(request.scope, receive))

    return endpoint


async def _unavailable(_request: Request) -> Response:
    return JSONResponse({"error": "temporarily_unavailable"}, status_code=503)


class _Late:
    """An ASGI app set after the port is known (an issuer names its own URL)."""

    def __init__(self) -> None:
        self.app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                else:
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        assert self.app is not None
        await self.app(scope, receive, send)


@asynccontextmanager
async def serve_authority(
    options: AuthorityOptions | None = None,
) -> AsyncGenerator[tuple[TestAuthority, list[SeenRequest]]]:
    """Serve an authorization server alone (its issuer is `authority.issuer`)."""
    authority = TestAuthority(options)
    seen: list[SeenRequest] = []
    late = _Late()
    async with serve_on_loopback(late) as authority_base:
        late.app = authority_app(authority, authority_base, seen)
        yield authority, seen
