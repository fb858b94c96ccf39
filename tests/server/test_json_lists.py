"""A list request's answer over HTTP is one JSON body (`served/json_lists.py`); other answers,
and event streams of more than one message, pass as the SDK wrote them."""

from __future__ import annotations

import json

import anyio
import httpx2
import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served.json_lists import JsonLists, only_message
from gateway.server.transports.envelope import EnvelopeCheck
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import serve
from .test_pass_through_sessions import RawSession, messages

pytestmark = pytest.mark.anyio

RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
NOTE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}'


def test_the_one_message_of_a_stream_is_found_past_pings_and_a_priming_event() -> None:
    stream = (
        b"id: 0\ndata:\n\n: ping - 2026-12-06\n\nevent: message\r\ndata: " + RESULT + b"\r\n\r\n"
    )
    assert only_message(stream) == RESULT
    assert only_message(b"data: " + RESULT + b"\n\n") == RESULT  # "message" is the default
    assert only_message(b'data: {"a":\ndata: 1}\n\n') == b'{"a":\n1}'


def test_a_stream_of_another_shape_has_no_one_message() -> None:
    two = b"event: message\ndata: " + NOTE + b"\n\nevent: message\ndata: " + RESULT + b"\n\n"
    assert only_message(two) is None
    assert only_message(b"event: other\ndata: " + RESULT + b"\n\n") is None
    assert only_message(b": ping\n\n") is None


def _sse_app(stream: bytes, status: int = 200) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream"), (b"mcp-session-id", b"s1")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        for piece in (stream[:7], stream[7:]):  # as sse-starlette writes: in pieces
            await send({"type": "http.response.body", "body": piece, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


async def _post(app: ASGIApp, method: str) -> httpx2.Response:
    transport = httpx2.ASGITransport(app=EnvelopeCheck(JsonLists(app), 1 << 20))
    async with httpx2.AsyncClient(transport=transport) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method}
        return await http.post("http://gateway/mcp", json=body)


async def test_a_listing_streamed_as_one_event_is_answered_as_json() -> None:
    pinged = b": ping\n\nevent: message\ndata: " + RESULT + b"\n\n"
    response = await _post(_sse_app(pinged), "tools/list")
    assert response.headers["content-type"] == "application/json"
    assert response.headers["mcp-session-id"] == "s1"
    assert response.headers["content-length"] == str(len(RESULT))
    assert response.content == RESULT


@pytest.mark.parametrize(
    ("method", "stream", "status"),
    [
        ("tools/call", b"event: message\ndata: " + RESULT + b"\n\n", 200),  # may stream progress
        ("prompts/list", b"data: " + NOTE + b"\n\ndata: " + RESULT + b"\n\n", 200),  # two
        ("tools/list", b"data: " + RESULT + b"\n\n", 404),
    ],
    ids=["not a list", "two messages", "not 200"],
)
async def test_other_answers_pass_as_they_came(method: str, stream: bytes, status: int) -> None:
    response = await _post(_sse_app(stream, status), method)
    assert (response.status_code, response.headers["content-type"]) == (
        status,
        "text/event-stream",
    )
    assert response.content == stream


@pytest.mark.integration
async def test_a_sessions_listing_is_json_and_its_calls_still_stream() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    with anyio.fail_after(30):
        async with McpToolkit(
            "toy", McpServerConfig(command="in-process"), target=toy.server
        ) as node:
            app = http_app(
                serve(Gateway([node], []), expose_tools=True, pass_through=False),
                HttpOptions("127.0.0.1", 0),
            )
            async with serve_on_loopback(app) as base, httpx2.AsyncClient() as http:
                session = RawSession(http, f"{base}/mcp", "2025-11-25")
                await session.open()
                kinds: list[str] = []
                for message in (
                    {"jsonrpc": "2.0", "id": 5, "method": "tools/list"},
                    {"jsonrpc": "2.0", "id": 6, "method": "prompts/list"},
                    session.call("toy__echo", {"a": 1}),
                ):
                    response = await http.post(
                        f"{base}/mcp", json=message, headers=session.headers()
                    )
                    assert response.headers["mcp-session-id"] == session.id
                    kinds.append(response.headers["content-type"])
                    [answer] = messages(kinds[-1], response.content)
                    assert answer["id"] == message["id"]
                assert await session.delete() == 200
    assert kinds == ["application/json", "application/json", "text/event-stream"]
    assert json.loads(response.content.split(b"data: ", 1)[1])["result"]["content"]
