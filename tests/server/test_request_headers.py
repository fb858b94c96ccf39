"""A request's headers read once: the same answers as a scan of the list, repeats included.

The helpers and the real layers that use them (Host/Origin check, the 2026-07-28 test, the
pass-through's header read), called as ASGI with the scopes uvicorn makes.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.types import Message, Receive, Scope, Send

from gateway.server.served.modern_headers import plain_headers
from gateway.server.transports.envelope import is_modern_post
from gateway.server.transports.host_check import AllowedHosts, HostCheck
from gateway.server.transports.request_headers import by_name, every, first

pytestmark = pytest.mark.anyio

MODERN = [
    (b"host", b"127.0.0.1:8000"),
    (b"accept", b"application/json, text/event-stream"),
    (b"content-type", b"application/json"),
    (b"mcp-protocol-version", b"2026-07-28"),
    (b"mcp-method", b"tools/call"),
    (b"mcp-name", b"d__echo"),
    (b"content-length", b"120"),
]


def scope(headers: list[tuple[bytes, bytes]], method: str = "POST") -> dict[str, Any]:
    return {"type": "http", "method": method, "path": "/mcp", "headers": headers}


def test_plain_headers_are_read_by_name() -> None:
    request = scope(MODERN)
    assert by_name(request) == dict(MODERN)
    assert first(request, b"mcp-name") == b"d__echo"
    assert every(request, b"host") == [b"127.0.0.1:8000"]
    assert first(request, b"origin") is None
    assert every(request, b"origin") == []
    assert by_name(request) is by_name(request)  # made once per request


@pytest.mark.parametrize(
    "extra",
    [
        [(b"host", b"evil.com")],  # a name repeated
        [(b"X-Upper", b"1")],  # a name not lowercase (ASGI servers lowercase them; one might not)
    ],
)
def test_repeated_or_cased_names_are_scanned_in_order(extra: list[tuple[bytes, bytes]]) -> None:
    request = scope([*MODERN, *extra])
    assert by_name(request) is None
    assert first(request, b"host") == b"127.0.0.1:8000"
    assert every(request, b"host") == [
        value for name, value in [*MODERN, *extra] if name == b"host"
    ]
    assert first(request, b"x-upper") is None  # names are compared as given, as before


def test_headers_replaced_by_a_layer_are_read_again() -> None:
    request = scope(MODERN)
    assert first(request, b"mcp-name") == b"d__echo"
    request["headers"] = [*MODERN[:-2], (b"mcp-name", b"other")]
    assert first(request, b"mcp-name") == b"other"


def test_the_modern_era_is_told_by_the_first_version_header() -> None:
    assert is_modern_post(scope(MODERN))
    assert not is_modern_post(scope(MODERN, method="GET"))
    older = [(b"mcp-protocol-version", b"2025-11-25"), *MODERN]
    assert not is_modern_post(scope(older))
    assert not is_modern_post(scope([h for h in MODERN if h[0] != b"mcp-protocol-version"]))


def test_the_pass_through_reads_its_headers_and_leaves_the_rest_to_the_sdk() -> None:
    assert plain_headers(scope(MODERN)) == {
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "d__echo",
    }
    # An `Mcp-Param-*` header, or a routing header repeated: the SDK's to judge.
    assert plain_headers(scope([*MODERN, (b"mcp-param-region", b"eu")])) is None
    assert plain_headers(scope([*MODERN, (b"mcp-method", b"tools/list")])) is None
    # A name that only holds the prefix is no parameter header.
    read = plain_headers(scope([*MODERN, (b"x-mcp-param-region", b"eu")]))
    assert read is not None
    assert read["mcp-name"] == "d__echo"
    # A repeated header the checks read, not a routing one: the first counts, as Starlette's.
    read = plain_headers(scope([*MODERN, (b"accept", b"text/plain")]))
    assert read is not None
    assert read["accept"] == "application/json, text/event-stream"


async def statuses(headers: list[tuple[bytes, bytes]]) -> int:
    """The status the real Host/Origin check gives a request with `headers` (200: let through)."""
    sent: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    check = HostCheck(app, AllowedHosts.build(("127.0.0.1",), 8000))
    await check(scope(headers), receive, send)
    return sent[0]["status"]


async def test_one_host_and_at_most_one_origin_pass_the_host_check() -> None:
    origin = (b"origin", b"http://127.0.0.1:8000")
    assert await statuses(MODERN) == 200
    assert await statuses([*MODERN, origin]) == 200
    assert await statuses([*MODERN, (b"host", b"127.0.0.1:8000")]) == 421
    assert await statuses([h for h in MODERN if h[0] != b"host"]) == 421
    assert await statuses([*MODERN, origin, origin]) == 403
    assert await statuses([*MODERN, (b"origin", b"http://evil.com")]) == 403
