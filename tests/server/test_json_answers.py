"""An answer over HTTP is one JSON body where nothing goes before its result
(`served/json_answers.py`): a list's always, a tool call's when its result comes alone, on
either path and right after its server restarted too. An answer with something before its
result streams from there on; errors, and event streams of another shape, pass as the SDK
wrote them."""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served.json_answers import JsonAnswers, only_message
from gateway.server.transports.envelope import EnvelopeCheck
from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from tests.servers.inprocess import ToyServer
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

from .proxying import gateway_front
from .support import serve
from .test_pass_through_sessions import RawSession, messages

pytestmark = pytest.mark.anyio

RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}'
ERROR = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32800,"message":"Request cancelled"}}'
PROGRESS = (
    b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}'
)
PIPED = Path(__file__).parents[1] / "servers" / "piped.py"
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
    transport = httpx2.ASGITransport(app=EnvelopeCheck(JsonAnswers(app), 1 << 20))
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


async def test_a_calls_result_alone_is_answered_as_json_past_a_priming_event() -> None:
    primed = b"id: 0\r\ndata:\r\n\r\nevent: message\r\ndata: " + RESULT + b"\r\n\r\n"
    response = await _post(_sse_app(primed), "tools/call")
    assert response.headers["content-type"] == "application/json"
    assert response.content == RESULT


@pytest.mark.parametrize(
    ("method", "stream", "status"),
    [
        ("prompts/list", b"data: " + NOTE + b"\n\ndata: " + RESULT + b"\n\n", 200),  # two
        ("tools/list", b"data: " + RESULT + b"\n\n", 404),
        ("tools/call", b"event: message\ndata: " + ERROR + b"\n\n", 200),
        ("tools/call", b"data: " + PROGRESS + b"\n\ndata: " + RESULT + b"\n\n", 200),
        ("tools/call", b"", 200),
    ],
    ids=["two messages", "not 200", "an error", "progress first", "nothing"],
)
async def test_other_answers_pass_as_they_came(method: str, stream: bytes, status: int) -> None:
    response = await _post(_sse_app(stream, status), method)
    assert (response.status_code, response.headers["content-type"]) == (
        status,
        "text/event-stream",
    )
    assert response.content == stream


@pytest.mark.parametrize(
    ("first", "session"),
    [(PROGRESS, None), (None, b"s1"), (None, None)],
    ids=["progress", "ping-on-a-session", "ping"],
)
async def test_what_goes_before_a_result_is_sent_as_it_comes(
    first: bytes | None, session: bytes | None
) -> None:
    """Held no longer than until something must go first: the event reaches the client while
    the call goes on. So does a ping on a session whose client may be asked a question (here
    unknown: no sessions are given); one on no session (2026-07-28: no question comes on the
    stream) begins a JSON body instead, with a newline."""
    event = (
        b": ping\r\n\r\n" if first is None else b"event: message\r\ndata: " + first + b"\r\n\r\n"
    )
    streams = first is not None or session is not None
    sent: list[Message] = []
    sent_on = anyio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": event, "more_body": True})
        await sent_on.wait()  # the client has it: the result comes later
        result = b"event: message\r\ndata: " + RESULT + b"\r\n\r\n"
        await send({"type": "http.response.body", "body": result, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def record(message: Message) -> None:
        sent.append(message)
        if message.get("body") == (event if streams else b"\n"):
            sent_on.set()

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    body = json.dumps(call).encode()
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", b"%d" % len(body)),
            *([] if session is None else [(b"mcp-session-id", session)]),
        ],
    }
    received = False

    async def receive() -> Message:
        nonlocal received
        if received:
            await anyio.sleep_forever()
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    with anyio.fail_after(10):
        await EnvelopeCheck(JsonAnswers(app), 1 << 20)(scope, receive, record)
    if not streams:
        assert sent[0]["headers"] == [(b"content-type", b"application/json")]
        assert b"".join(m.get("body", b"") for m in sent[1:]) == b"\n" + RESULT
        return
    assert sent[0]["headers"] == [(b"content-type", b"text/event-stream")]
    assert b"".join(m.get("body", b"") for m in sent[1:]) == (
        event + b"event: message\r\ndata: " + RESULT + b"\r\n\r\n"
    )


@pytest.mark.integration
async def test_a_1_mb_result_right_after_its_server_restarted_reaches_an_sdk_client() -> None:
    # While the node reconnects, a call is no longer passed through: the SDK's session path
    # answered it as one event over the SDK client's 1 MB cap ("Server-sent event exceeded
    # the 1048576 byte limit"), where passed through it came as JSON.
    big = 1_100_000
    config = McpServerConfig(command=sys.executable, args=[str(PIPED)])
    with anyio.fail_after(60):
        async with (
            gateway_front(config) as (url, layer, node),
            Client(url, mode="legacy") as client,
            httpx2.AsyncClient(timeout=30) as http,
        ):
            before = await client.call_tool("d__big", {"n": big})
            passed = layer.forwarded if layer is not None else 0
            pid = int(result_text(await node.call_tool("d__pid", {})))
            os.kill(pid, signal.SIGKILL)
            await node.wait_for_health(lambda health: health.state == "reconnecting")
            after = await client.call_tool("d__big", {"n": big})  # it waits for the restart
            assert layer is not None
            assert layer.forwarded == passed  # the usual path's
            pid = int(result_text(await node.call_tool("d__pid", {})))
            os.kill(pid, signal.SIGKILL)
            await node.wait_for_health(lambda health: health.state == "reconnecting")
            session = RawSession(http, url, "2025-11-25")
            await session.open()
            raw = await http.post(
                url, json=session.call("d__big", {"n": big}), headers=session.headers()
            )
    assert not before.is_error
    assert not after.is_error
    assert after.content == [types.TextContent(text="x" * big)]
    assert raw.headers["content-type"] == "application/json"
    [answer] = messages(raw.headers["content-type"], raw.content)
    assert answer["result"]["content"] == [{"type": "text", "text": "x" * big}]


@pytest.mark.integration
async def test_a_sessions_listing_and_call_are_json_and_a_call_with_progress_streams() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    toy.add_worker("work", interval=0)
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
                    session.call("toy__work", {"steps": 2}, progressToken="p"),
                ):
                    response = await http.post(
                        f"{base}/mcp", json=message, headers=session.headers()
                    )
                    assert response.headers["mcp-session-id"] == session.id
                    kinds.append(response.headers["content-type"])
                    *_progress, answer = messages(kinds[-1], response.content)
                    assert answer["id"] == message["id"]
                assert await session.delete() == 200
    assert kinds == ["application/json"] * 3 + ["text/event-stream"]
    assert [m.get("method") for m in messages(kinds[-1], response.content)] == [
        "notifications/progress",
        "notifications/progress",
        None,
    ]


@pytest.mark.integration
@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_a_resource_and_a_prompt_over_a_megabyte_reach_an_sdk_client(
    era: Literal["legacy", "auto"],
) -> None:
    # Read on the SDK's session path, each came as one event over the SDK client's 1 MB cap.
    big = 1_100_000
    docs = CatalogServer()
    docs.add_resource("file:///big.txt", "x" * big)
    docs.add_prompt("echo", "text")
    with anyio.fail_after(60):
        async with serve_on_loopback(docs.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp")
            async with (
                gateway_front(config) as (url, _layer, _node),
                Client(url, mode=era) as client,
            ):
                read = await client.read_resource("file:///big.txt")
                [prompt] = [p.name for p in (await client.list_prompts()).prompts]
                got = await client.get_prompt(prompt, {"text": "y" * big})
    [contents] = read.contents
    assert isinstance(contents, types.TextResourceContents)
    assert contents.text == "x" * big
    [message] = got.messages
    assert isinstance(message.content, types.TextContent)
    assert message.content.text.endswith("y" * big + "')]")


def _posted(message: Mapping[str, object]) -> tuple[Scope, Receive]:
    """A POST of `message` on no session, and its `receive`."""
    body = json.dumps(message).encode()
    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))],
    }
    received = False

    async def receive() -> Message:
        nonlocal received
        if received:
            await anyio.sleep_forever()
        received = True
        return {"type": "http.request", "body": body, "more_body": False}

    return scope, receive


async def test_a_cancel_on_no_session_ends_no_answer_begun() -> None:
    """A JSON answer begun for a request on no session (2026-07-28: clients pick the same ids)
    is not ended by another client's `notifications/cancelled` naming its id."""
    cancel_passed = anyio.Event()
    sent: list[Message] = []
    begun = anyio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if b"notifications/cancelled" in (await receive())["body"]:
            await send({"type": "http.response.start", "status": 202, "headers": []})
            await send({"type": "http.response.body", "body": b""})
            cancel_passed.set()
            return
        headers = [(b"content-type", b"text/event-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b": ping\r\n\r\n", "more_body": True})
        await cancel_passed.wait()
        result = b"event: message\r\ndata: " + RESULT + b"\r\n\r\n"
        await send({"type": "http.response.body", "body": result, "more_body": False})

    async def record(message: Message) -> None:
        sent.append(message)
        if message.get("body") == b"\n":
            begun.set()

    async def ignore(_message: Message) -> None:
        pass

    answers = EnvelopeCheck(JsonAnswers(app), 1 << 20)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "t"}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}

    async def answer_call() -> None:
        await answers(*_posted(call), record)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(answer_call)
            await begun.wait()
            await answers(*_posted(cancel), ignore)
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b"\n" + RESULT
