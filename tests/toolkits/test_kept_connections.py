"""A node's HTTP requests on kept connections: one that the server closed while it was idle
(its keep-alive timeout, racing the request) is sent again on a new connection; a request
that fails on a connection opened for it is not."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from tests.servers.scripted_http import CLOSE, ok, scripted
from toolkits.mcp.transport import _ReusingConnections  # pyright: ignore[reportPrivateUsage]

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(transport=_ReusingConnections(httpx2.AsyncHTTPTransport()))


async def test_a_request_on_a_kept_connection_the_server_closed_goes_out_again() -> None:
    traced: list[str] = []

    async def trace(event: str, info: object) -> None:
        traced.append(event)

    async with scripted([ok(b"one")], [CLOSE], [ok(b"two")]) as server, client() as http:
        first = await http.post(server.url, content=b"{}")
        assert first.text == "one"
        second = await http.post(server.url, content=b'{"n":2}', extensions={"trace": trace})
        assert second.text == "two"
    assert server.connections == 2
    # Sent on the kept connection (closed unanswered), then once on a new one.
    assert [r.endswith(b'{"n":2}') for r in server.requests] == [False, True, True]
    assert "connection.connect_tcp.started" in traced  # the caller's own trace still hears


async def test_a_request_that_fails_on_a_fresh_connection_is_not_sent_again() -> None:
    async with scripted([CLOSE], [ok(b"never")]) as server, client() as http:
        with anyio.fail_after(5), pytest.raises(httpx2.RemoteProtocolError):
            await http.post(server.url, content=b"{}")
    assert server.connections == 1
    assert len(server.requests) == 1
