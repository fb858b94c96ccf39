"""The lean HTTP/1.1 client of calls passed through, against a TCP server on 127.0.0.1 that
answers with exact bytes: framing, connection reuse and its one retry, refusals, and when the
client is used at all."""

from __future__ import annotations

import socket
from contextlib import AsyncExitStack

import anyio
import httpx2
import pytest
from anyio.abc import SocketAttribute

from tests.servers.scripted_http import CLOSE, ok, scripted
from toolkits.mcp import lean_http, lean_response
from toolkits.mcp.event_stream import EventData
from toolkits.mcp.lean_http import LeanHttp
from toolkits.mcp.oauth import LazyOAuth, McpOAuth
from toolkits.mcp.transport import HttpLink

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CHUNKED = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def post(lean: LeanHttp, body: bytes = b"{}") -> bytes:
    async with lean.post(body, {}) as response:
        return await response.aread()


async def test_a_sized_body_arrives_as_sent_and_the_connection_carries_the_next_request() -> None:
    async with (
        scripted([ok(b"hello")[:-2], b"lo"], [ok(b"again")]) as server,
        LeanHttp(server.url, {"X-Team": "blue", "Accept": "*/*"}) as lean,
    ):
        async with lean.post(b'{"n":1}', {"accept": "application/json"}) as response:
            assert response.status_code == 200
            assert [piece async for piece in response.aiter_bytes()] == [b"hel", b"lo"]
        assert await post(lean) == b"again"
        assert (server.connections, lean.opened, lean.idle) == (1, 1, 1)
    head, _, body = server.requests[0].partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    assert lines[0] == b"POST /mcp?x=1 HTTP/1.1"
    port = server.url.split(":")[2].split("/")[0]
    assert {
        b"host: 127.0.0.1:" + port.encode(),
        b"x-team: blue",
        b"accept: application/json",  # the request's own header wins
        b"content-length: 7",
    } <= set(lines)
    assert b"accept: */*" not in lines
    assert body == b'{"n":1}'


async def test_as_many_connections_as_were_busy_at_once_are_kept_for_the_next_wave() -> None:
    wave = 30  # more than the 20 kept at least
    async with scripted(*[[ok(b"x")]] * (2 * wave)) as server, LeanHttp(server.url, {}) as lean:
        for _ in range(2):
            async with AsyncExitStack() as stack:
                for _ in range(wave):  # each block holds its connection until the stack ends
                    response = await stack.enter_async_context(lean.post(b"{}", {}))
                    assert await response.aread() == b"x"
        assert (server.connections, lean.opened, lean.idle) == (wave, wave, wave)


async def test_a_chunked_body_with_line_ends_split_across_writes_ends_where_it_should() -> None:
    pieces = [
        CHUNKED + b"3\r",
        b"\nhel\r",
        b"\n2;ext=1\r\n",
        b"lo\r\n0\r\nX-Tr",
        b"ailer: t\r\n\r",
        b"\n",
    ]
    async with scripted(pieces, [ok(b"next")]) as server, LeanHttp(server.url, {}) as lean:
        assert await post(lean) == b"hello"
        assert await post(lean) == b"next"
        assert (server.connections, lean.opened) == (1, 1)


async def test_a_body_without_length_is_read_until_the_server_closes_and_not_reused() -> None:
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\r\n"
    async with (
        scripted(
            [head + b"some", b"thing", CLOSE], [ok(b"x", b"connection: close")], [ok()]
        ) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        assert await post(lean) == b"something"
        assert lean.idle == 0
        assert await post(lean) == b"x"  # `connection: close`: not kept either
        assert lean.idle == 0
        assert await post(lean) == b""
        assert (server.connections, lean.opened, lean.idle) == (3, 3, 1)


async def test_an_interim_answer_is_skipped_and_trailers_are_not_headers() -> None:
    trailed = CHUNKED + chunk(b"hi") + b"0\r\nx-trailer: t\r\n\r\n"
    async with (
        scripted([b"HTTP/1.1 100 Continue\r\n\r\n", trailed]) as server,
        LeanHttp(server.url, {}) as lean,
        lean.post(b"{}", {}) as response,
    ):
        assert (response.status_code, await response.aread()) == (200, b"hi")
        assert "x-trailer" not in response.headers


async def test_a_reader_that_lags_holds_about_a_megabyte_and_gets_every_byte() -> None:
    body = bytes(range(256)) * (6 * 4096)  # 6 MiB, written at once
    held: list[int] = []
    async with (
        scripted([ok(body)], [ok(b"next")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        async with lean.post(b"{}", {}) as response:
            pieces: list[bytes] = []
            async for piece in response.aiter_bytes():
                pieces.append(piece)
                await anyio.wait_all_tasks_blocked()  # the socket has had its chance meanwhile
                held.append(response.held)
        assert b"".join(pieces) == body
        assert await post(lean) == b"next"  # paused and resumed: the connection is kept
        assert (server.connections, lean.opened) == (1, 1)
    assert max(held) <= lean_response._MAX_BUFFERED + 262_144  # pyright: ignore[reportPrivateUsage]


async def test_a_second_answer_to_one_request_costs_the_connection() -> None:
    async with (
        scripted([ok(b"one") + ok(b"extra")], [ok(b"two")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        assert await post(lean) == b"one"
        assert await post(lean) == b"two"
        assert (server.connections, lean.opened) == (2, 2)


async def test_sse_lines_end_at_lf_crlf_or_cr_across_chunk_boundaries() -> None:
    body = [
        chunk(b"event: message\r"),
        chunk(b'\ndata: {"a":"\xe2\x80\xa8'),  # U+2028 ends no line in an event stream
        chunk(b'"'),  # no line end at all
        chunk(b"}\n\nda"),
        chunk(b"ta: 2\r\r"),
        chunk(b"\ndata:3\r\ndata:  4\n\n: ping"),
    ]
    events = EventData(max_event_bytes=100)
    async with (
        scripted([CHUNKED + b"".join(body) + b"0\r\n\r\n"]) as server,
        LeanHttp(server.url, {}) as lean,
        lean.post(b"{}", {}) as response,
    ):
        found = [data async for piece in response.aiter_bytes() for data in events.feed(piece)]
    assert response.headers["content-type"] == "text/event-stream"
    assert found == ['{"a":"\u2028"}'.encode(), b"2", b"3\n 4"]


async def test_a_kept_connection_the_server_closed_is_retried_once_on_a_new_one() -> None:
    async with (
        scripted([ok(b"one"), CLOSE], [ok(b"two")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        assert await post(lean) == b"one"
        assert lean.idle == 1
        await server.closed.wait()
        assert await post(lean, b'{"n":2}') == b"two"
        assert (server.connections, lean.opened) == (2, 2)
    assert server.requests[1].endswith(b'{"n":2}')


async def test_a_new_connection_closed_unanswered_fails_without_a_retry() -> None:
    async with scripted([CLOSE], [ok()]) as server, LeanHttp(server.url, {}) as lean:
        with pytest.raises(httpx2.RemoteProtocolError, match="without answering"):
            await post(lean)
        assert (server.connections, lean.opened, len(server.requests)) == (1, 1, 1)


async def test_a_kept_connection_that_fails_mid_answer_is_not_retried() -> None:
    async with (
        scripted([ok(b"one")], [b"HTTP/1.1 200 OK\r\n", CLOSE], [ok()]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        assert await post(lean) == b"one"
        with pytest.raises(httpx2.RemoteProtocolError, match="mid-answer"):
            await post(lean)
        assert (server.connections, lean.opened, len(server.requests)) == (1, 1, 2)


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 20 OK\r\n\r\n",
        b"SPDY/3 200 OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: 0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nx: " + b"a" * 70_000,
    ],
    ids=["status", "version", "header", "length", "encoding", "too-long"],
)
async def test_a_malformed_head_is_a_protocol_error(answer: bytes) -> None:
    async with scripted([answer]) as server, LeanHttp(server.url, {}) as lean:
        with pytest.raises(httpx2.RemoteProtocolError):
            await post(lean)
        assert lean.idle == 0


async def test_a_malformed_chunk_size_is_a_protocol_error_and_the_connection_is_closed() -> None:
    async with scripted([CHUNKED + b"zz\r\nhello\r\n"]) as server, LeanHttp(server.url, {}) as lean:
        with pytest.raises(httpx2.RemoteProtocolError, match="chunk size"):
            await post(lean)
        assert lean.idle == 0


async def test_leaving_early_reads_the_rest_and_keeps_the_connection() -> None:
    async with (
        scripted([ok(b"unread")[:-3], b"ead"], [ok(b"next")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        async with lean.post(b"{}", {}) as response:
            assert response.status_code == 200
        assert lean.idle == 1
        assert await post(lean) == b"next"
        assert lean.opened == 1


async def test_the_last_chunk_is_read_when_the_connection_is_next_taken_not_before_leaving() -> (
    None
):
    event = chunk(b"data: 1\n\n")
    async with (
        scripted([CHUNKED + event, b"0\r\n\r\n"], [ok(b"next")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        async with lean.post(b"{}", {}) as response:
            assert await anext(response.aiter_bytes()) == b"data: 1\n\n"
        assert response.unread  # the caller goes on at once; the server sends "0" later
        assert lean.idle == 1
        assert await post(lean) == b"next"
        assert not response.unread
        assert (server.connections, lean.opened, lean.idle) == (1, 1, 1)


async def test_an_unread_rest_that_does_not_end_in_time_costs_the_connection_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lean_response, "_DRAIN_SECONDS", 0.05)
    async with (
        scripted([CHUNKED + chunk(b"data: 1\n\n")], [ok(b"next")]) as server,
        LeanHttp(server.url, {}) as lean,
    ):
        async with lean.post(b"{}", {}) as response:
            assert await anext(response.aiter_bytes()) == b"data: 1\n\n"
        assert await post(lean) == b"next"  # on a new connection
        assert (server.connections, lean.opened) == (2, 2)


async def test_an_error_inside_the_block_closes_the_connection() -> None:
    async with scripted([ok(b"a")], [ok(b"b")]) as server, LeanHttp(server.url, {}) as lean:
        with pytest.raises(LookupError):
            async with lean.post(b"{}", {}):
                raise LookupError
        assert lean.idle == 0
        assert await post(lean) == b"b"
        assert (server.connections, lean.opened) == (2, 2)


async def test_closing_the_client_fails_a_read_in_flight() -> None:
    async def read_while_closing(lean: LeanHttp) -> None:
        async with lean.post(b"{}", {}) as response:
            pieces = response.aiter_bytes()
            assert await anext(pieces) == b"par"
            await lean.aclose()
            await anext(pieces)

    async with scripted([ok(b"partial")[:-4]]) as server, LeanHttp(server.url, {}) as lean:
        with pytest.raises(httpx2.ReadError):
            await read_while_closing(lean)
        assert lean.idle == 0


async def test_a_server_not_listening_is_a_connect_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    port = listener.extra(SocketAttribute.local_port)
    await listener.aclose()
    async with LeanHttp(f"http://127.0.0.1:{port}/mcp", {}) as lean:
        with anyio.fail_after(10), pytest.raises(httpx2.ConnectError):
            await post(lean)


async def test_a_host_name_whose_first_address_drops_packets_connects_on_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async with scripted([ok(b"through")]) as server:
        port = int(server.url.split(":")[2].split("/")[0])
        # A listener that never accepts, its one-place backlog taken: a SYN to it is dropped.
        # (127.0.0.2 is loopback too, and the only free address on the server's port.)
        black = socket.create_server(("127.0.0.2", port), backlog=0)
        queued = socket.create_connection(("127.0.0.2", port))
        tried: list[str] = []

        async def addresses(host: str, port: int) -> list[str]:
            tried.append(host)
            return ["127.0.0.2", "127.0.0.1"]

        monkeypatch.setattr(lean_http, "_addresses", addresses)
        try:
            async with LeanHttp(f"http://mcp.test:{port}/mcp", {}, connect_timeout=30) as lean:
                with anyio.fail_after(10):  # not the 30 s a dropped SYN would cost alone
                    assert await post(lean) == b"through"
        finally:
            queued.close()
            black.close()
    assert tried == ["mcp.test"]
    assert server.connections == 1


async def test_a_host_name_resolves_to_its_addresses_the_families_alternating() -> None:
    assert await lean_http._addresses("127.0.0.1", 80) == ["127.0.0.1"]  # pyright: ignore[reportPrivateUsage]
    found = await lean_http._addresses("localhost", 80)  # pyright: ignore[reportPrivateUsage]
    assert "127.0.0.1" in found
    assert len(found) == len(set(found))


async def test_a_header_with_a_line_break_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ValueError, match="line break"):
        LeanHttp("http://127.0.0.1:9/mcp", {"x-team": "blue\r\nx-admin: 1"})
    async with LeanHttp("http://127.0.0.1:9/mcp", {}) as lean:
        for bad in ({"mcp-session-id": "a\nb"}, {"x": "a\rb"}, {"x": "a\0b"}, {"x:y": "z"}):
            with pytest.raises(ValueError, match="line break, NUL or colon"):
                await post_with(lean, bad)
        assert lean.opened == 0


async def post_with(lean: LeanHttp, headers: dict[str, str]) -> None:
    async with lean.post(b"{}", headers):
        pass


@pytest.mark.parametrize(
    ("url", "proxy", "usable"),
    [
        ("http://127.0.0.1:8000/mcp", None, True),
        ("http://localhost/mcp", None, True),
        ("https://example.com/mcp", None, False),
        ("http://user:secret@127.0.0.1/mcp", None, False),
        ("http://127.0.0.1:notaport/mcp", None, False),
        ("http://127.0.0.1:8000/mcp", "HTTP_PROXY", False),
        ("http://127.0.0.1:8000/mcp", "all_proxy", False),
    ],
)
def test_only_plain_http_without_a_proxy_is_usable(
    url: str, proxy: str | None, usable: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    if proxy is not None:
        monkeypatch.setenv(proxy, "http://127.0.0.1:3128")
    assert LeanHttp.usable(url) is usable


async def _never_made() -> McpOAuth:
    raise AssertionError("the server never asked for authorization")


@pytest.mark.parametrize(
    ("auth", "cookie", "lean"),
    [
        ("none", False, True),
        ("lazy-oauth", False, True),  # not engaged: requests go as they are
        ("basic", False, False),
        ("none", True, False),
    ],
)
async def test_the_link_offers_the_lean_client_only_while_requests_carry_just_headers(
    auth: str, cookie: bool, lean: bool
) -> None:
    link = HttpLink()
    auths = {
        "none": None,
        "lazy-oauth": LazyOAuth(_never_made),
        "basic": httpx2.BasicAuth("u", "p"),
    }
    async with (
        httpx2.AsyncClient() as client,
        LeanHttp("http://127.0.0.1:9/mcp", {}) as client_lean,
    ):
        link.client, link.auth, link.lean_http = client, auths[auth], client_lean
        if cookie:
            client.cookies.set("affinity", "node-2")
        assert (link.lean() is client_lean) is lean
