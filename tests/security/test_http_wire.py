"""`serve --http` byte by byte: what raw clients sent and the gateway answered wrongly (QA round
6): a duplicate request id in flight, a body that stalls or ends early, a GET with
`Last-Event-ID`, header checks skipped on a cached listing, a wrong protocol version header on
a 2025-era request, a failed `initialize`, and media types in any case."""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.abc
import httpx2
import pytest

from gateway.server import HttpOptions

from .test_http_connections import Hold, Served, gateway
from .wire import LEGACY, MODERN, Era, HttpAnswer, HttpWire, initialize, modern_params

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ENVELOPE_LOG = "gateway.server.transports.envelope"
NOT_JSON = "Unsupported Media Type: Content-Type must be application/json"
DUPLICATE = (
    "Invalid Request: a request with this id is still in flight on this session; "
    "give each request its own id"
)


class Heard(logging.Handler):
    """Every log record of the process while it listens, to wait on with no sleep."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, text: str) -> None:
        """Wait for a record saying `text`, or for an error (the test fails sooner)."""
        while not self.errors() and not any(text in r.getMessage() for r in self.records):
            await self._changed.wait()

    def errors(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno >= logging.ERROR]


@contextmanager
def heard(debug: str = ENVELOPE_LOG) -> Generator[Heard]:
    """What the process logs in the block (the logger `debug` at DEBUG too)."""
    handler, root, chatty = Heard(), logging.getLogger(), logging.getLogger(debug)
    was = chatty.level
    root.addHandler(handler)
    chatty.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        chatty.setLevel(was)


def _head(served: Served, era: Era, length: int | None, **headers: str) -> bytes:
    """A POST's head (chunked when `length` is None)."""
    lines = [
        "POST /mcp HTTP/1.1",
        f"Host: {served.host}:{served.port}",
        "Accept: application/json, text/event-stream",
        "Content-Type: application/json",
        f"MCP-Protocol-Version: {era}",
        "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _listing(era: Era, request_id: int | str) -> bytes:
    """A `tools/list` request of `era`."""
    params = modern_params() if era == MODERN else {}
    listing: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/list",
        "params": params,
    }
    return json.dumps(listing).encode()


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_a_client_gone_before_its_body_is_whole_leaves_no_traceback(era: Era) -> None:
    options = HttpOptions("127.0.0.1", 0)
    async with gateway(options) as served, httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20), heard() as log:
            wire = HttpWire(http, served.url, era)
            await wire.open()
            session = {"Mcp-Session-Id": wire.session_id} if wire.session_id else {}
            gone = await served.connect(_head(served, era, 100, **session) + b'{"jsonrpc":')
            await gone.aclose()
            await log.until("went away")
            assert log.errors() == []
            # And the gateway goes on serving.
            assert (await wire.post(_listing(era, 1))).status == 200


async def test_a_request_id_in_flight_on_a_session_is_refused_until_its_answer() -> None:
    hold = Hold()
    held: list[HttpAnswer] = []
    pinged: list[HttpAnswer] = []
    answered = anyio.Event()
    call: dict[str, Any] = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
    call["params"] = {"name": "hold", "arguments": {}}
    async with (
        gateway(HttpOptions("127.0.0.1", 0), hold) as served,
        httpx2.AsyncClient(timeout=10) as http,
        anyio.create_task_group() as tg,
    ):
        with anyio.fail_after(20):
            wire = HttpWire(http, served.url, LEGACY)
            await wire.open()

            async def hold_id_5() -> None:
                held.append(await wire.post(json.dumps(call).encode()))
                answered.set()

            async def ping(request_id: int | str) -> None:
                pinged.append(await wire.post(_ping(request_id)))

            tg.start_soon(hold_id_5)
            await hold.started.wait()
            # Before: the SDK gave the second one the first one's answer stream; one of the
            # two was never answered.
            for request_id in (5, "5", 6):  # 5 and "5": one id to the SDK
                await ping(request_id)
            hold.release.set()
            await answered.wait()
            await ping(5)
            # Free once its answer is read, before the server's request task ends.
            listed = [await wire.post(_listing(LEGACY, 8)) for _ in range(5)]
            assert [answer.status for answer in listed] == [200] * 5
    *again, other, reused = pinged
    assert [a.status for a in again] == [400, 400]
    assert [a.reply for a in again] == [
        {"jsonrpc": "2.0", "id": same, "error": {"code": -32600, "message": DUPLICATE}}
        for same in (5, "5")
    ]
    assert other.reply == {"jsonrpc": "2.0", "id": 6, "result": {}}
    [answer] = held
    assert answer.reply is not None
    assert answer.reply["id"] == 5
    assert answer.reply["result"]["content"][0]["text"] == "released"
    assert reused.reply == {"jsonrpc": "2.0", "id": 5, "result": {}}  # a finished id is free


def _ping(request_id: int | str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()


async def test_a_body_that_stalls_is_answered_408_and_closed() -> None:
    options = HttpOptions("127.0.0.1", 0, read_timeout=0.5)
    async with gateway(options) as served, httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20), heard("gateway.server.transports.connections") as log:
            wire = HttpWire(http, served.url, LEGACY)
            await wire.open()
            session = {"Mcp-Session-Id": wire.session_id or ""}
            # Before: each was held open for ever (only a stalled head was timed out).
            stalled = [
                await served.connect(_head(served, LEGACY, 1000) + b'{"jsonrpc"'),
                await served.connect(_head(served, LEGACY, None, **session) + b"2\r\n{}\r\n"),
                await served.connect(_head(served, MODERN, None) + b"1\r\n{\r\n"),
                # Behind one answered first (HTTP/1.1 pipelining): its body is due from then.
                await served.connect(
                    _head(served, LEGACY, len(ping := _ping(1)), **session)
                    + ping
                    + _head(served, LEGACY, 1000, **session)
                    + b"{"
                ),
            ]
            answers = [await _read_to_the_end(stream) for stream in stalled]
            # The session and the server go on.
            assert (await wire.post(_listing(LEGACY, 2))).status == 200
    assert [answer.split(b"\r\n", 1)[0] for answer in answers] == [
        *[b"HTTP/1.1 408 Request Timeout"] * 3,
        b"HTTP/1.1 200 OK",
    ]
    assert b'"id":1,"result":{}' in answers[3]
    assert answers[3].count(b"HTTP/1.1 408 Request Timeout\r\n") == 1
    assert all(
        answer.endswith(b"\r\n\r\nThe request's body did not come in time\n") for answer in answers
    )
    assert log.errors() == []


async def _read_to_the_end(stream: anyio.abc.SocketStream) -> bytes:
    """All the server sends until it closes the connection."""
    received = b""
    try:
        while True:
            received += await stream.receive()
    except (anyio.EndOfStream, anyio.BrokenResourceError):
        return received


async def test_a_get_resuming_a_stream_gets_a_new_stream() -> None:
    async with (
        gateway(HttpOptions("127.0.0.1", 0)) as served,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20), heard() as log:
            wire = HttpWire(http, served.url, LEGACY)
            await wire.open()
            headers = {
                "Accept": "text/event-stream",
                "MCP-Protocol-Version": LEGACY,
                "Mcp-Session-Id": wire.session_id or "",
                "Last-Event-ID": "42",
            }
            # Before: 500, "ASGI callable returned without starting response" (no events
            # are kept, so the SDK had none to replay and answered nothing).
            async with http.stream("GET", served.url, headers=headers) as stream:
                status = stream.status_code
                kind = stream.headers.get("content-type")
            assert (await wire.post(_listing(LEGACY, 2))).status == 200
    assert (status, kind) == (200, "text/event-stream")
    assert log.errors() == []


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_media_types_are_read_in_any_case_and_others_get_a_jsonrpc_415(era: Era) -> None:
    async with (
        gateway(HttpOptions("127.0.0.1", 0)) as served,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20):
            wire = HttpWire(http, served.url, era)
            await wire.open()
            # Before: 415 on a 2025-era session (the SDK compares case-sensitively).
            served_kinds = [
                await wire.post(_listing(era, 1), **{"Content-Type": kind})
                for kind in ("APPLICATION/JSON", "Application/Json; Charset=UTF-8")
            ]
            # Before: 400 with a plain-text "Invalid Content-Type header".
            refused = [await wire.post(_listing(era, 2), **{"Content-Type": "text/plain"})]
            session = {"Mcp-Session-Id": wire.session_id} if wire.session_id else {}
            untyped = await http.post(
                served.url,
                content=_listing(era, 3),
                headers={
                    "Accept": "application/json, text/event-stream",
                    "MCP-Protocol-Version": era,
                    **session,
                },
            )
            refused.append(HttpAnswer(untyped.status_code, [untyped.json()], untyped.text))
    assert [answer.status for answer in served_kinds] == [200, 200]
    assert [answer.reply and answer.reply["id"] for answer in served_kinds] == [1, 1]
    not_json = {"code": -32600, "message": NOT_JSON}
    assert [(a.status, a.reply) for a in refused] == [
        (415, {"jsonrpc": "2.0", "id": None, "error": not_json})
    ] * 2


@pytest.mark.parametrize("stateless", [False, True])
async def test_a_cached_tool_listing_gets_the_header_checks_of_any_request(
    stateless: bool,
) -> None:
    options = HttpOptions("127.0.0.1", 0, stateless=stateless)
    async with gateway(options) as served, httpx2.AsyncClient(timeout=10) as http:
        with anyio.fail_after(20):
            wire = HttpWire(http, served.url, MODERN)
            listed = [await wire.post(_listing(MODERN, n)) for n in (1, 2)]  # the second: kept
            good = {
                "Accept": "application/json, text/event-stream",
                "Content-Type": "application/json",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/list",
            }
            wrong: list[dict[str, str]] = [
                {k: v for k, v in good.items() if k != "Mcp-Method"},
                {**good, "Mcp-Method": "prompts/list"},
                {**good, "Mcp-Method": "x/y"},
                {**good, "Accept": "text/event-stream"},
                {**good, "Accept": "text/html"},
                {**good, "Accept": "application/json"},  # the SDK wants both
            ]
            # Before: 200 and the whole tool list, for every one.
            answers = [
                await http.post(served.url, content=_listing(MODERN, 3), headers=headers)
                for headers in wrong
            ]
    assert [answer.status for answer in listed] == [200, 200]
    mismatch = {
        "code": -32020,
        "message": "mcp-method header does not match the request body's method",
    }
    assert [(a.status_code, a.json()["error"]) for a in answers[:3]] == [(400, mismatch)] * 3
    assert [a.status_code for a in answers[3:]] == [406] * 3


HANDSHAKE = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


async def test_a_2025_era_request_with_a_wrong_version_header_is_told_the_versions() -> None:
    async with (
        gateway(HttpOptions("127.0.0.1", 0)) as served,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20):
            wire = HttpWire(http, served.url, LEGACY)
            await wire.open()
            # Before: -32602 "params._meta must be an object carrying the required ...".
            on_session = [
                await wire.post(_ping(n), **{"MCP-Protocol-Version": version})
                for n, version in enumerate(("bogus", "1900-01-01", MODERN))
            ]
            wire.session_id = None
            opening = await wire.post(
                json.dumps(initialize(9)).encode(), **{"MCP-Protocol-Version": MODERN}
            )
            unknown = await wire.post(_listing(LEGACY, 10), **{"MCP-Protocol-Version": "bogus"})
            # A 2026-07-28 request without its envelope is still the SDK's to judge.
            bare = await wire.post(_listing(LEGACY, 11), **{"MCP-Protocol-Version": MODERN})
            modern = await HttpWire(http, served.url, MODERN).post(_listing(MODERN, 12))

    def refused(request_id: int, requested: str, why: str, supported: list[str]) -> Any:
        message = f"Unsupported protocol version in the MCP-Protocol-Version header: {why} (data.supported)"
        data = {"supported": supported, "requested": requested}
        error = {"code": -32022, "message": message, "data": data}
        return 400, {"jsonrpc": "2.0", "id": request_id, "error": error}

    on_a_session = "a request on a session carries the session's version"
    assert [(a.status, a.reply) for a in on_session] == [
        refused(0, "bogus", on_a_session, HANDSHAKE),
        refused(1, "1900-01-01", on_a_session, HANDSHAKE),
        refused(2, MODERN, on_a_session, HANDSHAKE),
    ]
    assert (opening.status, opening.reply) == refused(
        9, MODERN, "initialize opens a session of one of these versions", HANDSHAKE
    )
    assert (unknown.status, unknown.reply) == refused(
        10, "bogus", "no version of that name is served", [*HANDSHAKE, MODERN]
    )
    assert bare.status == 400
    assert bare.reply is not None
    assert bare.reply["error"]["code"] == -32602
    assert modern.status == 200


async def test_a_request_on_a_session_whose_header_names_another_version_is_refused() -> None:
    """The spec: a request whose MCP-Protocol-Version is not the session's gets 400. Another
    version the gateway serves was taken (only unknown ones were refused)."""
    async with (
        gateway(HttpOptions("127.0.0.1", 0)) as served,
        httpx2.AsyncClient(timeout=10) as http,
    ):
        with anyio.fail_after(20):
            wire = HttpWire(http, served.url, LEGACY)
            await wire.open()
            other = await wire.post(_ping(1), **{"MCP-Protocol-Version": "2025-06-18"})
            same = await wire.post(_ping(2))
            older = HttpWire(http, served.url, LEGACY)
            opening = {
                **initialize(3),
                "params": {**initialize()["params"], "protocolVersion": "2025-03-26"},
            }
            opened = await older.post(
                json.dumps(opening).encode(), **{"MCP-Protocol-Version": "2025-03-26"}
            )
            assert opened.status == 200, opened.text
            older.session_id = older.last_session_id
            its_own = await older.post(_ping(4), **{"MCP-Protocol-Version": "2025-03-26"})
            newer = await older.post(_ping(5))
    why = "a request on a session carries the session's version"
    message = (
        f"Unsupported protocol version in the MCP-Protocol-Version header: {why} (data.supported)"
    )

    def refused(request_id: int, requested: str, supported: str) -> Any:
        data = {"supported": [supported], "requested": requested}
        error = {"code": -32022, "message": message, "data": data}
        return 400, {"jsonrpc": "2.0", "id": request_id, "error": error}

    assert (other.status, other.reply) == refused(1, "2025-06-18", LEGACY)
    assert (same.status, its_own.status) == (200, 200)
    assert (newer.status, newer.reply) == refused(5, LEGACY, "2025-03-26")
