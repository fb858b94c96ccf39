"""What the SDK's checks of a 2026-07-28 POST read of its headers, for the layers that answer
such a request before the SDK (`pass_through`, `tool_list_cache`): they must refuse what the
SDK refuses, or let the SDK answer it.

plain_headers(scope)            -> the headers those checks read, or None (the SDK's to judge)
accepts(accept)                 -> (takes JSON, takes an event stream), as the SDK reads Accept
sdk_takes(scope, fields)        -> whether the SDK would serve the request (headers and envelope)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, cast

from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from starlette.requests import Request
from starlette.types import Scope

from ..transports.request_headers import by_name

__all__ = ["accepts", "plain_headers", "sdk_takes"]

_ROUTING_HEADERS = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
"""Headers the SDK refuses to see twice (`find_duplicated_routing_header`)."""
_READ_HEADERS = _ROUTING_HEADERS | {b"accept", b"content-type"}
"""What the checks of a 2026-07-28 call read (`check_accept_headers`, the ladder)."""
_READ = tuple((name, name.decode()) for name in _READ_HEADERS)


@dataclass(frozen=True, slots=True)
class _Headed:
    """What `check_accept_headers` reads of a request."""

    headers: dict[str, str]


@functools.lru_cache(maxsize=64)
def accepts(accept: str) -> tuple[bool, bool]:
    """Whether an `Accept` value takes JSON, and an event stream, as the SDK judges it
    (clients send one or two values, again and again: judged once each)."""
    return check_accept_headers(cast(Request, _Headed({"accept": accept})))


def plain_headers(scope: Scope) -> dict[str, str] | None:
    """The request headers the checks read, by lowercase name (the first of repeated ones, as
    Starlette's `Headers` reads them); None if a routing header is repeated or an `Mcp-Param-*`
    one is there (the SDK's to judge). Decodes only those."""
    found = by_name(scope)
    if found is not None:  # no name repeated, all lowercase: no scan in Python
        if b"\nmcp-param-" in b"\n" + b"\n".join(found):
            return None
        return {text: found[raw].decode("latin-1") for raw, text in _READ if raw in found}
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.lower()  # ASGI servers send names lowercase; one might not
        if name in _READ_HEADERS:
            text = name.decode("latin-1")
            if text in headers:
                if name in _ROUTING_HEADERS:
                    return None
                continue
            headers[text] = raw_value.decode("latin-1")
        elif name.startswith(b"mcp-param-"):
            return None
    return headers


def sdk_takes(scope: Scope, fields: dict[str, Any]) -> bool:
    """Whether the SDK would serve the 2026-07-28 request `fields` (a POST of `scope`, its
    Content-Type checked by `envelope`) rather than refuse it: its Accept takes both answers
    (406), no routing header repeats and its envelope and headers agree (the ladder: -32020,
    -32022, -32602)."""
    headers = plain_headers(scope)
    if headers is None or accepts(headers.get("accept", "")) != (True, True):
        return False
    route = classify_inbound_request(fields, headers=headers)
    return isinstance(route, InboundModernRoute)
