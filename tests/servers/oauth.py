"""An MCP server that requires a real authorization server's tokens, for tests.

`ProtectedMcp` fronts an in-process MCP server as a resource server (RFC 9728): it answers a
request without a valid token 401 with `WWW-Authenticate` (with or without the
`resource_metadata` hint and a `scope`), publishes its metadata path-based or at the root (or,
as a 2025-03-26 server, none, its authorization server at its own origin: `legacy_world`),
checks each token's audience (the RFC 8707 `resource` it was issued for), and asks for the
`write` scope (403 `insufficient_scope`, a step-up) before a call to its `write` tool. The
authorization server is `oauth_authority`'s. Everything both saw is recorded for the tests to
assert on.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, cast

import mcp_types as types
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.servers.asgi import buffered_body, serve_on_loopback
from tests.servers.inprocess import ToyServer, text_result
from tests.servers.oauth_authority import (
    AuthorityOptions,
    SeenRequest,
    TestAuthority,
    authority_app,
    serve_authority,
)

__all__ = [
    "AuthorityOptions",
    "OAuthWorld",
    "ProtectedMcp",
    "SeenRequest",
    "TestAuthority",
    "authority_app",
    "legacy_world",
    "oauth_world",
    "serve_authority",
]


class ProtectedMcp:
    """An MCP server (tools `echo`, `write`) at `path` behind bearer tokens of `authority`; an
    ASGI app."""

    def __init__(
        self,
        authority: TestAuthority,
        *,
        metadata_at: Literal["path", "root", "hint", "none"] = "path",
        hint: bool = True,
        challenge_scope: str | None = "read",
        scopes_supported: list[str] | None = None,
        checks_audience: bool = True,
        path: str = "/mcp",
    ) -> None:
        self.authority = authority
        self.checks_audience = checks_audience
        self.path = path
        self.metadata_at = metadata_at
        self.hint = (hint or metadata_at == "hint") and metadata_at != "none"
        self.challenge_scope = challenge_scope
        self.scopes_supported = scopes_supported
        self.resource = ""  # set once served
        self.seen: list[SeenRequest] = []
        self.refused = 0
        toy = ToyServer("protected")

        async def echo(_ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
            return text_result(f"echo:{args.get('text')}")

        async def write(_ctx: Any, args: dict[str, Any]) -> types.CallToolResult:
            return text_result(f"wrote:{args.get('text')}")

        toy.add("echo", echo)
        toy.add("write", write)
        self.toy = toy
        self._mcp = toy.server.streamable_http_app(host="127.0.0.1", streamable_http_path=path)

    def served_at(self, base_url: str) -> str:
        """Call once the port is known; returns the MCP endpoint URL (the resource)."""
        self.resource = f"{base_url}{self.path}"
        self._base = base_url
        return self.resource

    def metadata_url(self) -> str:
        assert self.metadata_at != "none"
        return {
            "path": f"{self._base}/.well-known/oauth-protected-resource{self.path}",
            "root": f"{self._base}/.well-known/oauth-protected-resource",
            "hint": f"{self._base}/meta/resource.json",
        }[self.metadata_at]

    def tokens_seen(self) -> list[str]:
        return [
            r.headers["authorization"].removeprefix("Bearer ")
            for r in self.seen
            if "authorization" in r.headers
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._mcp(scope, receive, send)  # the lifespan
            return
        body, replay = await buffered_body(receive)
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        seen = SeenRequest(
            method=scope["method"],
            path=scope["path"],
            headers={k.decode().lower(): v.decode() for k, v in headers},
            body=body,
            client_port=(scope.get("client") or ("", 0))[1],
        )
        self.seen.append(seen)
        if (
            scope["method"] == "GET"
            and self.metadata_at != "none"
            and scope["path"] == _path_of(self.metadata_url())
        ):
            await self._metadata()(scope, replay, send)
            return
        if scope["path"] != self.path:
            await Response(status_code=404)(scope, replay, send)
            return
        refusal = await self._refusal(seen)
        if refusal is not None:
            self.refused += 1
            await refusal(scope, replay, send)
            return
        await self._mcp(scope, replay, send)

    def _metadata(self) -> Response:
        document: dict[str, Any] = {
            "resource": self.resource,
            "authorization_servers": [self.authority.issuer],
        }
        if self.scopes_supported is not None:
            document["scopes_supported"] = self.scopes_supported
        return JSONResponse(document)

    async def _refusal(self, seen: SeenRequest) -> Response | None:
        token = seen.headers.get("authorization", "")
        access = (
            await self.authority.load_access_token(token.removeprefix("Bearer "))
            if token.startswith("Bearer ")
            else None
        )
        if access is None or (access.expires_at is not None and access.expires_at < time.time()):
            return self._challenge(401, "invalid_token", self.challenge_scope)
        if self.checks_audience and access.resource != self.resource:
            return self._challenge(401, "invalid_token", self.challenge_scope)
        if (
            seen.method == "POST"
            and _calls_tool(seen.body, "write")
            and "write" not in access.scopes
        ):
            return self._challenge(403, "insufficient_scope", "read write")
        return None

    def _challenge(self, status: int, error: str, scope: str | None) -> Response:
        parts = [f'error="{error}"']
        if scope is not None:
            parts.append(f'scope="{scope}"')
        if self.hint:
            parts.append(f'resource_metadata="{self.metadata_url()}"')
        return JSONResponse(
            {"error": error},
            status_code=status,
            headers={"WWW-Authenticate": f"Bearer {', '.join(parts)}"},
        )


def _path_of(url: str) -> str:
    return "/" + url.split("/", 3)[3]


def _calls_tool(body: bytes, name: str) -> bool:
    try:
        message: Any = json.loads(body)
    except ValueError:
        return False
    if not isinstance(message, dict):
        return False
    fields = cast(dict[str, Any], message)
    params: Any = fields.get("params")
    return (
        fields.get("method") == "tools/call"
        and isinstance(params, dict)
        and cast(dict[str, Any], params).get("name") == name
    )


@dataclass
class OAuthWorld:
    """An authorization server and a protected MCP server, both on 127.0.0.1."""

    authority: TestAuthority
    protected: ProtectedMcp
    url: str
    """The protected MCP endpoint."""
    authority_seen: list[SeenRequest]

    def token_requests(self) -> list[SeenRequest]:
        return [r for r in self.authority_seen if r.path.endswith("/token")]


@asynccontextmanager
async def oauth_world(
    options: AuthorityOptions | None = None, **protected: Any
) -> AsyncGenerator[OAuthWorld]:
    """Serve both; `protected` goes to `ProtectedMcp`."""
    async with serve_authority(options) as (authority, seen):
        resource = ProtectedMcp(authority, **protected)
        async with serve_on_loopback(resource) as resource_base:
            url = resource.served_at(resource_base)
            yield OAuthWorld(authority, resource, url, seen)


_AUTHORITY_PATHS = ("/authorize", "/token", "/register", "/revoke", "/introspect", "/.well-known/o")


class _SameOrigin:
    """A protected MCP server with its authorization server at its own origin."""

    def __init__(self, resource: ProtectedMcp) -> None:
        self.resource = resource
        self.authority: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        ours = path.startswith(_AUTHORITY_PATHS) and "protected-resource" not in path
        if scope["type"] == "http" and self.authority is not None and ours:
            await self.authority(scope, receive, send)
        else:
            await self.resource(scope, receive, send)


@asynccontextmanager
async def legacy_world(
    options: AuthorityOptions | None = None, **protected: Any
) -> AsyncGenerator[OAuthWorld]:
    """A 2025-03-26 server: no protected resource metadata, its authorization server at its
    own origin (the SDK's legacy discovery), no audience it checks (resource indicators came
    later); `protected` goes to `ProtectedMcp`."""
    authority = TestAuthority(options)
    seen: list[SeenRequest] = []
    resource = ProtectedMcp(authority, metadata_at="none", checks_audience=False, **protected)
    both = _SameOrigin(resource)
    async with serve_on_loopback(both) as base:
        both.authority = authority_app(authority, base, seen)
        yield OAuthWorld(authority, resource, resource.served_at(base), seen)
