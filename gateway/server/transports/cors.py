"""CORS for the origins in `allowed_origins`: what lets a browser app (the MCP Inspector UI,
a chat page on the openai JS SDK) call `/mcp` and `/v1` from another origin.

Passing the `Origin` check (`host_check`) is not enough for a browser: it sends a preflight
`OPTIONS` first (without the bearer token) for a request with JSON or an `Authorization`
header, and hands the app an answer only when it names the app's origin. So, for an origin
that matches an `allowed_origins` pattern, and only for one (never `*`):

- a preflight is answered here, before the token check, 204 allowing the methods and the
  headers MCP clients send, and among those asked for the 2026-07-28 `Mcp-*` ones and those
  the OpenAI SDKs send (`X-Stainless-*` on every request, `OpenAI-Organization`, ...);
- every other answer names the origin (`Access-Control-Allow-Origin`, `Vary: Origin`) and
  exposes the headers a client reads (`mcp-session-id`, `www-authenticate`, the OpenAI SDKs'
  `x-should-retry`, ...).

No credentials mode: bearer tokens go in a header, not cookies.

Cors(app, origins)  -> ASGI; a request without an `Origin` goes on untouched.
"""

from __future__ import annotations

from collections.abc import Awaitable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .host_check import AllowedHosts
from .request_headers import first

__all__ = ["Cors"]

ALLOWED_METHODS = b"GET, POST, DELETE"
ALLOWED_HEADERS: tuple[bytes, ...] = (
    b"accept",
    b"authorization",
    b"content-type",
    b"last-event-id",
    b"mcp-protocol-version",
    b"mcp-session-id",
)
EXPOSED_HEADERS = (
    b"mcp-session-id, mcp-protocol-version, www-authenticate, retry-after, x-should-retry"
)
MIRRORED: tuple[bytes, ...] = (b"mcp-", b"x-stainless-", b"openai-")
"""Prefixes of the headers allowed when asked for: 2026-07-28 MCP's, and the OpenAI SDKs' (a
browser refuses to send a request with a header the preflight did not allow)."""
MAX_AGE = b"3600"
"""Seconds a browser may keep a preflight's answer (Chrome keeps one at most 2 hours)."""

_ORIGIN = b"origin"
_REQUEST_METHOD = b"access-control-request-method"
_REQUEST_HEADERS = b"access-control-request-headers"


class Cors:
    """ASGI wrapper answering preflights and naming the origin for `origins` (patterns as
    `allowed_origins` takes them)."""

    def __init__(self, app: ASGIApp, origins: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = AllowedHosts.build((), 0, (), origins)

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        origin = first(scope, _ORIGIN) if scope["type"] == "http" else None
        if origin is None or not self.allowed.allows_origin(origin.decode("latin-1")):
            return self.app(scope, receive, send)  # no frame here while a stream is open
        if scope["method"] == "OPTIONS" and first(scope, _REQUEST_METHOD) is not None:
            return _preflight(origin, first(scope, _REQUEST_HEADERS), send)
        return self.app(scope, receive, _NamingOrigin(origin, send))


async def _preflight(origin: bytes, asked: bytes | None, send: Send) -> None:
    headers = [
        (b"access-control-allow-origin", origin),
        (b"access-control-allow-methods", ALLOWED_METHODS),
        (b"access-control-allow-headers", b", ".join(_allowed_headers(asked))),
        (b"access-control-max-age", MAX_AGE),
        (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        (b"content-length", b"0"),
    ]
    await send({"type": "http.response.start", "status": 204, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _allowed_headers(asked: bytes | None) -> list[bytes]:
    """The headers MCP clients send, and those asked for that begin as `MIRRORED`: 2026-07-28
    mirrors a request's method and name (`Mcp-Method`, `Mcp-Name`) and parameters
    (`Mcp-Param-*`); the OpenAI SDKs (Stainless's) send `X-Stainless-Os`, `-Lang`, `-Arch`,
    `-Runtime`, `-Retry-Count`, ... with every request."""
    names = list(ALLOWED_HEADERS)
    for name in (asked or b"").lower().split(b","):
        name = name.strip()
        if name.startswith(MIRRORED) and name not in names and _token(name):
            names.append(name)
    return names


def _token(name: bytes) -> bool:
    return all(48 <= c <= 57 or 97 <= c <= 122 or c in b"!#$%&'*+-.^_`|~" for c in name)


class _NamingOrigin:
    """`send` adding the CORS headers to the answer's start."""

    __slots__ = ("_origin", "_send")

    def __init__(self, origin: bytes, send: Send) -> None:
        self._origin = origin
        self._send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers: list[tuple[bytes, bytes]] = [
                (name, value)
                for name, value in message.get("headers", [])
                if not name.lower().startswith(b"access-control-")
            ]
            vary = [i for i, (name, _) in enumerate(headers) if name.lower() == b"vary"]
            if vary:
                name, value = headers[vary[0]]
                headers[vary[0]] = (name, value + b", Origin")
            else:
                headers.append((b"vary", b"Origin"))
            headers += [
                (b"access-control-allow-origin", self._origin),
                (b"access-control-expose-headers", EXPOSED_HEADERS),
            ]
            message = {**message, "headers": headers}
        await self._send(message)
