"""DNS-rebinding protection: `Host` and `Origin` must name this server, host and port exactly.

A header is parsed (`host[:port]`, `scheme://host[:port]`) and compared part by part, never
as a prefix: `127.0.0.1:8000@evil.com` and `http://127.0.0.1:1.evil.com` are not loopback.
The bound address allows its own host and port (all loopback names for a loopback bind);
config adds patterns: `HOST`, `HOST:PORT`, `HOST:*` (any port, or none) for hosts, and the
same after `http://` or `https://` for origins. A missing `Origin` is fine (not a browser);
a missing or repeated `Host` is not.

AllowedHosts.build(names, port, hosts, origins)  -> the rules (ValueError on a bad pattern)
HostCheck(app, allowed)                          -> ASGI: 421 for a Host, 403 for an Origin

A refusal is said in the words of the path's clients: a JSON-RPC error (`id` null) on `/mcp`,
OpenAI's `{"error": {...}}` under `/v1/`, plain text elsewhere. None repeats the refused
value: a browser page that got the value in would get it back.

Each refused value is logged once, as a WARNING naming the setting that would allow it (a
proxy in front that passes its own Host is the usual cause); after `_WARNED_LIMIT` distinct
values one more line says the rest go unlogged, so a scanner cannot flood the log.
"""

from __future__ import annotations

import ipaddress
import logging
import re
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import Literal

from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .request_headers import every

__all__ = ["LOOPBACK_NAMES", "AllowedHosts", "HostCheck", "is_loopback"]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")

log = logging.getLogger(__name__)

AnyPort = Literal["*"]
_NAME = r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_HOST = re.compile(rf"(?P<host>{_NAME})(?::(?P<port>[0-9]{{1,5}}|\*))?")
_ORIGIN = re.compile(rf"(?P<scheme>https?)://(?P<host>{_NAME})(?::(?P<port>[0-9]{{1,5}}|\*))?")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class _Place:
    """A parsed host and port; `port` None is no port given, "*" (patterns only) any."""

    host: str
    port: int | AnyPort | None
    scheme: str = ""

    def allows(self, given: _Place) -> bool:
        return (
            self.scheme == given.scheme
            and self.host == given.host
            and (self.port == "*" or self.port == given.port)
        )


def _parse(pattern: re.Pattern[str], text: str, *, wildcard: bool) -> _Place | None:
    found = pattern.fullmatch(text)
    if found is None:
        return None
    host = found["host"].lower()
    if host.startswith("["):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    port: int | AnyPort | None = None
    if found["port"] == "*":
        if not wildcard:
            return None
        port = "*"
    elif found["port"] is not None:
        port = int(found["port"])
        if port > 65535:
            return None
    scheme = found.groupdict().get("scheme") or ""
    return _Place(host, port, scheme.lower())


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    hosts: tuple[_Place, ...]
    origins: tuple[_Place, ...]

    @classmethod
    def build(
        cls,
        names: tuple[str, ...],
        port: int,
        hosts: tuple[str, ...] = (),
        origins: tuple[str, ...] = (),
    ) -> AllowedHosts:
        """The server's own `names` on `port` (0: not known here, so any port) and the
        patterns `hosts`/`origins`. Raises `ValueError` naming a pattern that does not parse."""
        names = tuple(name.lower() for name in names)
        own: int | AnyPort = port or "*"
        allowed_hosts = [_Place(name, own) for name in names]
        allowed_origins = [_Place(name, own, scheme) for name in names for scheme in _SCHEMES]
        if own == 80:  # a client leaves out the scheme's default port
            allowed_hosts += [_Place(name, None) for name in names]
            allowed_origins += [_Place(name, None, "http") for name in names]
        for text in hosts:
            allowed_hosts.append(_pattern(_HOST, text, "HOST, HOST:PORT or HOST:*"))
        for text in origins:
            allowed_origins.append(_pattern(_ORIGIN, text, "http(s)://HOST[:PORT or :*]"))
        return cls(tuple(allowed_hosts), tuple(allowed_origins))

    def allows_host(self, header: str) -> bool:
        given = _parse(_HOST, header, wildcard=False)
        return given is not None and any(rule.allows(given) for rule in self.hosts)

    def allows_origin(self, header: str) -> bool:
        given = _parse(_ORIGIN, header, wildcard=False)
        return given is not None and any(rule.allows(given) for rule in self.origins)


_SCHEMES = ("http", "https")
_JUDGED_LIMIT = 256
_WARNED_LIMIT = 32
_SHOWN_CHARACTERS = 100


def _pattern(pattern: re.Pattern[str], text: str, shape: str) -> _Place:
    place = _parse(pattern, text.strip(), wildcard=True)
    if place is None:
        raise ValueError(f"{text!r} is not {shape}")
    return place


_MCP_PATHS = ("/mcp", "/mcp/")
_OPENAI_PREFIX = "/v1/"
_SERVER_ERROR = -32000
"""JSON-RPC's implementation-defined server error, as the TypeScript SDK's Host check sends."""


def _refused(path: str, header: str, status: int, setting: str) -> Response:
    """The refusal of a request whose `header` is not allowed, as the path's clients read one."""
    message = (
        f"Invalid {header} header: this server does not answer to it "
        f"(DNS-rebinding protection; its operator can allow it with [gateway] {setting})"
    )
    if path in _MCP_PATHS:
        error = {"code": _SERVER_ERROR, "message": message}
        return JSONResponse({"jsonrpc": "2.0", "id": None, "error": error}, status)
    if path.startswith(_OPENAI_PREFIX):
        code = f"invalid_{header.lower()}"
        error = {"message": message, "type": "invalid_request_error", "param": None, "code": code}
        return JSONResponse({"error": error}, status)
    return PlainTextResponse(message, status)


class HostCheck:
    """ASGI middleware refusing requests whose `Host` (421) or `Origin` (403) is not allowed."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed
        self._judged: dict[bytes, bool] = {}
        """`Host` values seen, and whether each is allowed: a client sends the same one on every
        request, and parsing it again was ~1 % of a proxied call's CPU."""
        self._warned: set[tuple[str, str]] = set()
        """Refused (header, value) pairs logged already."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        refusal = self._refusal(scope) if scope["type"] == "http" else None
        if refusal is not None:
            return refusal(scope, receive, send)
        return self.app(scope, receive, send)  # no frame here while a stream is open

    def _refusal(self, scope: Scope) -> Response | None:
        hosts = every(scope, b"host")
        origins = [value.decode("latin-1") for value in every(scope, b"origin")]
        if len(hosts) != 1 or not self._allows_host(hosts[0]):
            self._warn("Host", [host.decode("latin-1") for host in hosts], "allowed_hosts")
            return _refused(scope["path"], "Host", 421, "allowed_hosts")
        if len(origins) > 1 or (origins and not self.allowed.allows_origin(origins[0])):
            self._warn("Origin", origins, "allowed_origins")
            return _refused(scope["path"], "Origin", 403, "allowed_origins")
        return None

    def _warn(self, header: str, values: list[str], setting: str) -> None:
        """Say once per refused value why the request was refused and what would allow it."""
        shown = ", ".join(repr(value[:_SHOWN_CHARACTERS]) for value in values) or "none"
        key = (header, shown)
        if key in self._warned or len(self._warned) > _WARNED_LIMIT:
            return
        self._warned.add(key)
        if len(self._warned) > _WARNED_LIMIT:
            log.warning(
                "refused requests with more than %d different Host or Origin headers; not "
                "logging further ones",
                _WARNED_LIMIT,
            )
            return
        if len(values) == 1:
            log.warning(
                "refused a request with %s %s (%s); if this server is meant to answer to it, "
                "add it to [gateway] %s (logged once per value)",
                header,
                shown,
                "HTTP 421" if header == "Host" else "HTTP 403",
                setting,
            )
        else:
            log.warning(
                "refused a request with %d %s headers (%s): a request carries exactly one",
                len(values),
                header,
                shown,
            )

    def _allows_host(self, raw: bytes) -> bool:
        allowed = self._judged.get(raw)
        if allowed is None:
            allowed = self.allowed.allows_host(raw.decode("latin-1"))
            if len(self._judged) < _JUDGED_LIMIT:  # a client sending random ones fills it once
                self._judged[raw] = allowed
        return allowed
