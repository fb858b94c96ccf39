"""A request's headers, read once for every layer that asks.

Each layer in front of the MCP endpoint reads a header or two of every request (Host, Origin,
Content-Length, the protocol version, the session id), and a scan of `scope["headers"]` is a
Python loop over all of them: together the scans were a tenth of the Python a call passed
through runs (bench/RESULTS.md, item 34). `by_name` makes one dict of them per request, in C,
where a dict can stand for the list: every name lowercase (as uvicorn and h11 give them) and
none repeated (as clients send them). Otherwise the helpers scan the list, as ASGI gives it.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import Scope

__all__ = ["by_name", "every", "first"]

_KEY = "agent_gateway.headers_by_name"

RawHeaders = list[tuple[bytes, bytes]]


def by_name(scope: Scope) -> Mapping[bytes, bytes] | None:
    """The request's headers by name; None when a name repeats or is not lowercase."""
    raw: RawHeaders = scope["headers"]
    kept: tuple[RawHeaders, Mapping[bytes, bytes] | None] | None = scope.get(_KEY)
    if kept is not None and kept[0] is raw:  # a layer that rewrites them gets a new list
        return kept[1]
    found: dict[bytes, bytes] | None = dict(raw)
    if not b"".join(found).islower() or len(found) != len(raw):
        found = None
    scope[_KEY] = (raw, found)
    return found


def first(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header `name` (lowercase), if any."""
    found = by_name(scope)
    if found is not None:
        return found.get(name)
    return next((value for key, value in scope["headers"] if key == name), None)


def every(scope: Scope, name: bytes) -> list[bytes]:
    """Every value of header `name` (lowercase), in order."""
    found = by_name(scope)
    if found is not None:
        value = found.get(name)
        return [] if value is None else [value]
    return [value for key, value in scope["headers"] if key == name]
