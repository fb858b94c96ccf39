"""Bearer challenges over HTTP: a refused request learns what to ask the authorization server for.

RFC 6750 §3 as the MCP authorization spec uses it, each answer naming the protected resource
metadata (`resource_metadata`) and the scopes wanted (`scope`):

- `RequireToken`: a request without a valid token gets 401, naming the required scopes (so a
  client asks for those, not everything the metadata lists): `invalid_token` for a bearer
  token refused, no error code when none was sent (§3.1: the client may not have known it
  needs one); a token lacking a required scope gets 403 `insufficient_scope`.
- `ScopeChallenge`: a JSON-RPC request the token's scopes do not allow (`ScopePolicy`: a call
  to a tool of a node no held scope grants, a resource, prompt or completion without `*`)
  gets 403 `insufficient_scope` naming the narrowest scope that would allow it beside the
  scopes held, so an MCP client re-authorizes for them (step-up) and retries. A refusal no
  new token could lift (a tool the gateway does not know, one no configured scope grants)
  goes on to the MCP layer, which answers it as an MCP error (`scope_guard`).
- `unchecked_token`: a token that could not be checked now (its issuer unreachable, a key
  ID its issuer may have rotated in since its keys were fetched) gets 503 and `Retry-After`,
  not 401: the token may be good, and a client told `invalid_token` would throw it away.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Sequence
from typing import Any, cast

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.authentication import AuthenticationError
from starlette.requests import HTTPConnection
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .auth import ScopePolicy
from .envelope import buffered_body
from .oauth_tokens import TokenUnchecked
from .request_headers import first

__all__ = ["RequireToken", "ScopeChallenge", "send_challenge", "unchecked_token"]

_RETRY_SECONDS = 30


async def send_challenge(
    send: Send,
    status: int,
    error: str | None,
    description: str,
    *,
    scope: str | None,
    metadata_url: str | None,
) -> None:
    """Answer with `status` and a Bearer challenge (and the same error as a JSON body). With
    `error` None the challenge carries no error code or description, only the body does."""
    parts = [f'error="{error}"', f'error_description="{_quoted(description)}"'] if error else []
    if scope:
        parts.append(f'scope="{_quoted(scope)}"')
    if metadata_url:
        parts.append(f'resource_metadata="{metadata_url}"')
    said = {"error": error, "error_description": description} if error else {}
    body = json.dumps(said or {"error_description": description}).encode()
    challenge = f"Bearer {', '.join(parts)}" if parts else "Bearer"
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        (b"www-authenticate", challenge.encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def unchecked_token(_conn: HTTPConnection, exc: AuthenticationError) -> Response:
    """The answer to a token whose check failed (`AuthenticationMiddleware`'s `on_error`):
    the only such failure is one that may pass (`oauth_tokens.TokenUnchecked`), which says
    when to retry."""
    retry = exc.retry_after if isinstance(exc, TokenUnchecked) else _RETRY_SECONDS
    said = {"error": "temporarily_unavailable", "error_description": str(exc)}
    return JSONResponse(said, status_code=503, headers={"Retry-After": str(retry)})


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _sent_bearer(scope: Scope) -> bool:
    authorization = first(scope, b"authorization")
    return authorization is not None and authorization[:7].lower() == b"bearer "


def _user(scope: Scope) -> AuthenticatedUser | None:
    user = scope.get("user")
    return user if isinstance(user, AuthenticatedUser) else None


class RequireToken:
    """ASGI wrapper: only requests with a valid token carrying every required scope pass."""

    def __init__(self, app: ASGIApp, required: Sequence[str], metadata_url: str | None) -> None:
        self.app = app
        self.required = list(required)
        self.metadata_url = metadata_url

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        user = _user(scope)
        if user is None:
            return send_challenge(
                send,
                401,
                "invalid_token" if _sent_bearer(scope) else None,
                "Authentication required",
                scope=" ".join(self.required),
                metadata_url=self.metadata_url,
            )
        missing = [name for name in self.required if name not in user.scopes]
        if missing:
            return send_challenge(
                send,
                403,
                "insufficient_scope",
                f"Required scope: {' '.join(missing)}",
                scope=" ".join(dict.fromkeys([*user.scopes, *self.required])),
                metadata_url=self.metadata_url,
            )
        return self.app(scope, receive, send)  # no frame here while a stream is open


class ScopeChallenge:
    """ASGI wrapper: a POSTed request the OAuth token's scopes do not allow, where a new token
    could, gets 403 `insufficient_scope` (see the module docstring). Reads the whole body:
    bound its size outside."""

    def __init__(self, app: ASGIApp, policy: ScopePolicy, metadata_url: str | None) -> None:
        self.app = app
        self.policy = policy
        self.metadata_url = metadata_url

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        user = _user(scope)
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or user is None
            or not self.policy.restricts(user.access_token)
        ):
            return self.app(scope, receive, send)  # no frame here while a stream is open
        return self._check(user, scope, receive, send)

    async def _check(
        self, user: AuthenticatedUser, scope: Scope, receive: Receive, send: Send
    ) -> None:
        body, replay = await buffered_body(receive)
        request = _request(body) if body is not None else None
        if request is not None:
            access = user.access_token
            refused = await self.policy.refusal(access, *request)
            if refused is not None and refused.would_allow:
                await send_challenge(
                    send,
                    403,
                    "insufficient_scope",
                    refused.message,
                    scope=refused.challenge_scopes(self.policy.settings, access),
                    metadata_url=self.metadata_url,
                )
                return
        await self.app(scope, replay, send)


def _request(body: bytes) -> tuple[str, dict[str, Any] | None] | None:
    """A JSON-RPC request's method and params; None for anything else (notifications,
    responses, what the envelope check refuses)."""
    try:
        message: Any = json.loads(body)
    except (ValueError, RecursionError):  # the envelope check refuses it, not this
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    fields = cast(dict[str, Any], message)
    method, params = fields.get("method"), fields.get("params")
    if not isinstance(method, str):
        return None
    return method, cast(dict[str, Any], params) if isinstance(params, dict) else None
