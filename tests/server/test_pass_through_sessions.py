"""Proxied calls on 2025-era HTTP sessions, passed straight through, answer as the SDK's
session path does.

The downstream server and the two gateways (pass-through on and off) of `test_pass_through`;
clients of the handshake era: the SDK's `Client` in legacy mode, and raw JSON-RPC over HTTP
for what only the wire shows (older protocol versions, the messages of a cancelled call, a
session deleted under a call). Every call is answered alike by both gateways, and the first
passed it through, a client that can be asked included (its server's questions put to it on
the call's answer).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway.server import HttpOptions
from gateway.server.served.pass_through import PassThrough
from tests.servers.asgi import serve_on_loopback
from toolkits import result_text
from toolkits.mcp import McpServerConfig
from toolkits.mcp.config import ProtocolMode

from .proxying import (
    LEVELS_HEARD,
    ClientAnswers,
    answers_by_name,
    gateway_front,
    heard_at_levels,
    set_log_level,
)
from .test_pass_through import CALLS, NODE_PROTOCOLS, Downstream, Heard, answered_each

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
_ACCEPT = "application/json, text/event-stream"


class RawSession:
    """A 2025-era session spoken as raw JSON-RPC over HTTP: what the wire carries."""

    def __init__(self, http: httpx2.AsyncClient, url: str, version: str) -> None:
        self.http = http
        self.url = url
        self.version = version
        self.id = ""
        self._ids = 0

    async def open(self, capabilities: JsonObject | None = None) -> None:
        params = {
            "protocolVersion": self.version,
            "capabilities": capabilities or {},
            "clientInfo": {"name": "raw", "version": "1"},
        }
        response = await self.http.post(
            self.url,
            json=self._request("initialize", params),
            headers={"accept": _ACCEPT},
        )
        self.id = response.headers["mcp-session-id"]
        [answer] = messages(response.headers["content-type"], response.content)
        assert answer["result"]["protocolVersion"] == self.version
        await self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def headers(self) -> dict[str, str]:
        return {
            "accept": _ACCEPT,
            "mcp-session-id": self.id,
            "mcp-protocol-version": self.version,
        }

    def call(self, name: str, arguments: JsonObject, **meta: Any) -> JsonObject:
        params: JsonObject = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return self._request("tools/call", params)

    async def post(self, message: JsonObject) -> list[JsonObject]:
        """The messages answering `message` (none for a notification)."""
        response = await self.http.post(self.url, json=message, headers=self.headers())
        assert response.status_code in (200, 202), response.text
        assert response.headers.get("mcp-session-id") == self.id
        return messages(response.headers.get("content-type", ""), response.content)

    async def answer_into(
        self, message: JsonObject, answers: dict[str, list[JsonObject]], key: str
    ) -> None:
        """`post`, the answer kept under `key` (for a call answered while the test acts)."""
        answers[key] = await self.post(message)

    async def delete(self) -> int:
        response = await self.http.delete(self.url, headers=self.headers())
        return response.status_code

    def _request(self, method: str, params: JsonObject) -> JsonObject:
        self._ids += 1
        return {"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params}


def messages(content_type: str, body: bytes) -> list[JsonObject]:
    """The JSON-RPC messages of an answer, JSON or an event stream alike."""
    if content_type.startswith("application/json"):
        return [json.loads(body)] if body else []
    found: list[JsonObject] = []
    for event in body.decode().replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].strip() for line in event.split("\n") if line.startswith("data:")]
        if data and data != [""]:
            found.append(cast(JsonObject, json.loads("\n".join(data))))
    return found


@asynccontextmanager
async def front(
    url: str, options: HttpOptions, *, pass_through: bool, protocol: ProtocolMode = "auto"
) -> AsyncGenerator[tuple[str, PassThrough | None]]:
    """A gateway serving the downstream's tools over HTTP; its pass-through layer, if on."""
    config = McpServerConfig(url=url, protocol=protocol)
    async with gateway_front(config, pass_through=pass_through, options=options) as (
        front_url,
        layer,
        _,
    ):
        token = {"authorization": f"Bearer {options.tokens[0]}"} if options.tokens else {}
        async with (
            httpx2.AsyncClient(headers=token) as http,
            Client(streamable_http_client(front_url, http_client=http)) as client,
        ):
            await client.list_tools()  # it learns its tools' names
        yield front_url, layer


@asynccontextmanager
async def both_fronts(
    options: HttpOptions | None = None, protocol: ProtocolMode = "auto"
) -> AsyncGenerator[tuple[Downstream, str, str, PassThrough]]:
    """The downstream, a gateway passing calls through and one that does not; their node
    speaks `protocol` to the downstream, which declares logging
    (the clients set their levels)."""
    down = Downstream(logging=True)
    options = options or HttpOptions("127.0.0.1", 0)
    async with (
        serve_on_loopback(down.app()) as base,
        front(f"{base}/mcp", options, pass_through=True, protocol=protocol) as (fast, layer),
        front(f"{base}/mcp", options, pass_through=False, protocol=protocol) as (usual, _),
    ):
        assert layer is not None
        yield down, fast, usual, layer


async def _sdk_answers(url: str, log_level: types.LoggingLevel | None) -> tuple[Any, ...]:
    logs = Heard()
    async with Client(
        url, mode="legacy", logging_callback=logs.on_log, log_level=log_level
    ) as client:
        answers = await answered_each(client, CALLS)  # `d__big`'s over 1 MB: JSON either way
    return answers, logs.logs


@NODE_PROTOCOLS
async def test_calls_on_a_handshake_session_pass_through_and_answer_as_the_session_path_does(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with both_fronts(protocol=protocol) as (_, fast, usual, layer):
            for level in ("info", "error", None):  # a set level filters nothing (both paths)
                before = layer.forwarded
                passed = await _sdk_answers(fast, level)
                assert layer.forwarded - before == len(CALLS)
                assert passed == await _sdk_answers(usual, level)
    answers, logs = passed
    by_name = answers_by_name(answers, logs, protocol=protocol)
    assert "_meta" not in by_name["d__echo"][0]  # handshake-era results carry no serverInfo
    assert len(by_name["d__big"][0]["content"][0]["text"]) == 3_000_000


@NODE_PROTOCOLS
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_the_wire_answer_of_a_session_call_is_the_sdks_in_every_handshake_version(
    version: str, protocol: ProtocolMode
) -> None:
    with anyio.fail_after(60):
        async with (
            both_fronts(protocol=protocol) as (_, fast, usual, layer),
            httpx2.AsyncClient() as http,
        ):
            heard: dict[str, list[list[JsonObject]]] = {}
            for url in (fast, usual):
                session = RawSession(http, url, version)
                await session.open()
                for name, arguments in CALLS:
                    message = session.call(name, arguments, progressToken=f"p-{name}")
                    heard.setdefault(url, []).append(await session.post(message))
                assert await session.delete() == 200
    assert layer.forwarded == len(CALLS)
    assert heard[fast] == heard[usual]
    steps = heard[fast][CALLS.index(("d__steps", {"n": 3}))]
    assert [m["method"] for m in steps[:-1]] == [
        "notifications/progress",
        "notifications/message",
    ] * 3
    assert steps[0]["params"] == {
        "progressToken": "p-d__steps",
        "progress": 1.0,
        "total": 3.0,
        "message": "step 1",
    }


@NODE_PROTOCOLS
async def test_a_session_hears_the_levels_its_client_set_on_either_path(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with both_fronts(protocol=protocol) as (_, fast, usual, layer):
            heard: dict[str, list[list[str]]] = {}
            for url in (fast, usual):
                logs = Heard()
                async with Client(url, mode="legacy", logging_callback=logs.on_log) as client:
                    await client.list_tools()
                    heard[url] = await heard_at_levels(client, logs.logs)
            assert layer.forwarded == 3
            # One client's level is its own: another session on the same gateway, at once.
            quiet, chatty = Heard(), Heard()
            async with (
                Client(fast, mode="legacy", logging_callback=quiet.on_log) as first,
                Client(fast, mode="legacy", logging_callback=chatty.on_log) as second,
            ):
                await set_log_level(first, "error")
                await first.call_tool("d__levels", {})
                await second.call_tool("d__levels", {})
    assert heard[fast] == heard[usual] == LEVELS_HEARD
    assert (quiet.logs, chatty.logs) == ([], LEVELS_HEARD[0])


ASKING_TOOLS = ("d__ask", "d__sample", "d__roots")
"""A server's questions during a call: on the call's own stream (elicitation, sampling), and on
the session's (roots)."""


async def asked_on_both_paths(
    protocol: ProtocolMode, mode: str, tools: tuple[str, ...], *, roots_only: bool = False
) -> dict[str, list[str]]:
    """What `tools` answer (echoing "hi") to a client of `mode` that can be asked (all three
    capabilities, or roots only), through both gateways; each gateway's client answers and
    records its questions alike (compared here), and every call passed through."""
    asked: dict[str, list[str]] = {}
    answers: dict[str, ClientAnswers] = {}
    with anyio.fail_after(60):
        async with both_fronts(protocol=protocol) as (_, fast, usual, layer):
            for url in (fast, usual):
                answers[url] = ClientAnswers()
                declared = answers[url].callbacks()
                if roots_only:
                    declared = {"list_roots_callback": declared["list_roots_callback"]}
                async with Client(url, mode=mode, **declared) as client:
                    await client.list_tools()
                    asked[url] = [
                        result_text(await client.call_tool(name, {"message": "hi"}))
                        for name in tools
                    ]
    assert layer.forwarded == len(tools)
    assert asked[fast] == asked[usual]
    for seen in ("elicited", "sampled", "roots_asked"):
        assert getattr(answers[fast], seen) == getattr(answers[usual], seen)
    return {"fast": asked[fast], "usual": asked[usual]}


def check_asked(protocol: ProtocolMode, asked: list[str]) -> None:
    """`ASKING_TOOLS`, then `greet`, `declared`, `echo`, asked of a client declaring all three."""
    assert asked[-3:] == ["hello Ada", "sampling,elicitation,roots", "hi"]
    if protocol == "auto":
        assert asked[:3] == ["user is Ada", "upstream-model says 42", "work file:///work"]


def check_not_asked(protocol: ProtocolMode, asked: list[str]) -> None:
    """`ASKING_TOOLS`, then `declared`, asked of a client declaring roots only."""
    ask, sample, roots, declared = asked
    if protocol == "modern":  # told with the call: roots only
        assert declared == "roots"
        return
    assert declared == "sampling,elicitation,roots"  # the node's session declared all three
    assert "elicitation/create refused: the upstream client lacks elicitation" in ask
    assert "sampling/createMessage refused: the upstream client lacks sampling" in sample
    assert roots == "work file:///work"


ASKED = (*ASKING_TOOLS, "d__greet", "d__declared", "d__echo")


@NODE_PROTOCOLS
async def test_a_client_that_can_be_asked_is_asked_through_a_call_passed_through(
    protocol: ProtocolMode,
) -> None:
    """The calls pass through and their server's questions are put to the client as on the
    session path: asked mid-call (a handshake-era node) or in input-required rounds (`greet`,
    a 2026-07-28 node, which declares with each call what the client answers)."""
    asked = await asked_on_both_paths(protocol, "legacy", ASKED)
    check_asked(protocol, asked["fast"])


@NODE_PROTOCOLS
async def test_what_the_client_did_not_declare_it_is_not_asked_as_on_the_session_path(
    protocol: ProtocolMode,
) -> None:
    tools = (*ASKING_TOOLS, "d__declared")
    asked = await asked_on_both_paths(protocol, "legacy", tools, roots_only=True)
    check_not_asked(protocol, asked["fast"])


async def _answered_on_the_wire(
    session: RawSession, name: str, answer: Callable[[JsonObject], JsonObject]
) -> tuple[list[JsonObject], list[JsonObject]]:
    """Call `name` and reply to each question of its server with `answer(question)`, as its
    own POST: what the call's answer carried, and the questions."""
    heard: list[JsonObject] = []
    questions: list[JsonObject] = []
    call = session.call(name, {})
    async with session.http.stream(
        "POST", session.url, json=call, headers=session.headers()
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            message = json.loads(line[5:])
            heard.append(message)
            if "method" in message and "id" in message:
                questions.append(message)
                reply = {"jsonrpc": "2.0", "id": message["id"], **answer(message)}
                assert await session.post(reply) == []  # 202, nothing to read
    return heard, questions


async def test_a_question_on_the_wire_and_the_clients_refusal_passed_on() -> None:
    def refuse(_question: JsonObject) -> JsonObject:
        return {"error": {"code": -1, "message": "not now"}}

    def malformed(_question: JsonObject) -> JsonObject:
        return {"result": {"action": "perhaps"}}

    heard: dict[str, list[list[JsonObject]]] = {}
    asked: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(60):
        async with (
            both_fronts() as (_, fast, usual, layer),
            httpx2.AsyncClient() as http,
        ):
            for url in (fast, usual):
                session = RawSession(http, url, "2025-11-25")
                await session.open({"elicitation": {}})
                for answer in (refuse, malformed):
                    messages, questions = await _answered_on_the_wire(session, "d__ask", answer)
                    heard.setdefault(url, []).append(messages)
                    asked.setdefault(url, []).extend(questions)
                assert await session.delete() == 200
    assert layer.forwarded == 2
    # The SDK numbers its questions; ours are strings it never uses.
    assert [type(q["id"]) for q in asked[fast]] == [str, str]
    assert [type(q["id"]) for q in asked[usual]] == [int, int]
    for question in (*asked[fast], *asked[usual]):
        del question["id"]
    assert asked[fast] == asked[usual]
    assert asked[fast][0]["method"] == "elicitation/create"
    assert [m[1:] for m in heard[fast]] == [m[1:] for m in heard[usual]]  # all but the question
    refused, broken = (m[-1]["result"]["content"][0]["text"] for m in heard[fast])
    assert refused == "could not ask: not now"
    assert "the upstream client's answer is malformed" in broken


async def test_a_call_cancelled_while_its_question_waits_ends_without_an_answer() -> None:
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(60):
        async with both_fronts() as (down, fast, usual, layer), httpx2.AsyncClient() as http:
            for url in (fast, usual):
                down.cancelled = anyio.Event()
                session = RawSession(http, url, "2025-11-25")
                await session.open({"elicitation": {}})
                call = session.call("d__hesitate", {})
                heard[url] = []
                async with session.http.stream(
                    "POST", url, json=call, headers=session.headers()
                ) as response:
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        message = json.loads(line[5:])
                        heard[url].append(message)
                        if message.get("method") == "elicitation/create":
                            cancel = {"requestId": call["id"], "reason": "enough"}
                            await session.post(
                                {
                                    "jsonrpc": "2.0",
                                    "method": "notifications/cancelled",
                                    "params": cancel,
                                }
                            )
                        elif message.get("method") == "notifications/cancelled":
                            late = {
                                "jsonrpc": "2.0",
                                "id": message["params"]["requestId"],
                                "result": {"action": "decline"},
                            }
                            assert await session.post(late) == []  # answered all the same
                await down.cancelled.wait()
                again = await session.post(session.call("d__echo", {"message": "still here"}))
                assert again[0]["result"]["content"] == [{"type": "text", "text": "still here"}]
    assert layer.forwarded == 2
    # The question is withdrawn on its call's answer, so its client may close the form it
    # shows. The spec: the receiver of `notifications/cancelled` SHOULD NOT answer the
    # request; the SDK's session path answers it all the same.
    withdrawn = ["elicitation/create", "notifications/cancelled"]
    assert [m.get("method") for m in heard[fast]] == withdrawn
    assert [m.get("method") for m in heard[usual]] == [*withdrawn, None]
    assert heard[usual][-1]["error"] == {"code": -32800, "message": "Request cancelled"}
    for question, cancelled in (heard[fast][:2], heard[usual][:2]):
        assert cancelled["params"]["requestId"] == question["id"]


async def test_a_call_its_client_cancels_is_cancelled_at_the_server_and_not_answered() -> None:
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, usual, layer), httpx2.AsyncClient() as http:
            answered: dict[str, list[JsonObject]] = {}
            for url in (fast, usual):
                down.started, down.cancelled = anyio.Event(), anyio.Event()
                session = RawSession(http, url, "2025-11-25")
                await session.open()
                call = session.call("d__wait", {})
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.answer_into, call, answered, url)
                    await down.started.wait()
                    cancel = {"requestId": call["id"], "reason": "enough"}
                    notification = {
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": cancel,
                    }
                    assert await session.post(notification) == []
                    await down.cancelled.wait()
                again = await session.post(session.call("d__echo", {"message": "still here"}))
                assert again[0]["result"]["content"] == [{"type": "text", "text": "still here"}]
    assert layer.forwarded == 2
    assert answered[fast] == []  # an event stream ended with no message: no answer, at once
    assert answered[usual] == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {"code": -32800, "message": "Request cancelled"},
        }
    ]


async def test_the_sdk_client_cancelling_a_session_call_cancels_it_at_the_server() -> None:
    with anyio.fail_after(30):
        async with (
            both_fronts() as (down, fast, _usual, layer),
            Client(fast, mode="legacy") as client,
        ):

            async def wait() -> None:
                await client.call_tool("d__wait", {})

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                await down.started.wait()
                tg.cancel_scope.cancel()
            await down.cancelled.wait()
            after = await client.call_tool("d__echo", {"message": "still here"})
    assert layer.forwarded == 2
    assert after.content == [types.TextContent(text="still here")]


class LeavingAsAnswered(httpx2.AsyncBaseTransport):
    """Real HTTP, in the order that a quick answer to a cancelled call and its client leaving
    the session meet by chance: the answer to the call of `tool` reaches the client once its
    `notifications/cancelled` is answered and its DELETE sent (its session closed), and the
    DELETE goes on once the client has read that answer."""

    def __init__(self, tool: str) -> None:
        self._http = httpx2.AsyncHTTPTransport()
        self._tool = tool
        self._cancelled = anyio.Event()
        self._leaving = anyio.Event()
        self._answer_read = anyio.Event()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method == "DELETE":
            await self._cancelled.wait()
            self._leaving.set()
            await self._answer_read.wait()
            return await self._http.handle_async_request(request)
        sent: JsonObject = json.loads(request.content) if request.method == "POST" else {}
        response = await self._http.handle_async_request(request)
        if sent.get("method") == "notifications/cancelled":
            self._cancelled.set()
        elif sent.get("method") == "tools/call" and sent["params"]["name"] == self._tool:
            await self._leaving.wait()
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Read(response.stream, self._answer_read)
        return response

    async def aclose(self) -> None:
        await self._http.aclose()


class _Read(httpx2.AsyncByteStream):
    def __init__(self, stream: httpx2.AsyncByteStream, read: anyio.Event) -> None:
        self._stream = stream
        self._read = read

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()
        self._read.set()


async def test_a_client_leaving_as_its_cancelled_call_ends_sees_no_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, _usual, layer):
            race = LeavingAsAnswered("d__wait")
            async with (
                httpx2.AsyncClient(transport=race) as http,
                Client(streamable_http_client(fast, http_client=http), mode="legacy") as client,
            ):

                async def wait() -> None:
                    await client.call_tool("d__wait", {})

                async with anyio.create_task_group() as tg:
                    tg.start_soon(wait)
                    await down.started.wait()
                    tg.cancel_scope.cancel()
            # Answered at once with a JSON -32800, the call raised BrokenResourceError out of
            # the `async with` (the SDK's client hands a JSON body on as if its session lived).
            await down.cancelled.wait()
    assert layer.forwarded == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


async def test_a_session_deleted_under_a_call_ends_it_as_the_session_path_does() -> None:
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, usual, layer), httpx2.AsyncClient() as http:
            answered: dict[str, list[JsonObject]] = {}
            for url in (fast, usual):
                down.started, down.cancelled = anyio.Event(), anyio.Event()
                session = RawSession(http, url, "2025-11-25")
                await session.open()
                async with anyio.create_task_group() as tg:
                    tg.start_soon(session.answer_into, session.call("d__wait", {}), answered, url)
                    await down.started.wait()
                    assert await session.delete() == 200
                    await down.cancelled.wait()
                gone = await http.post(
                    url, json=session.call("d__echo", {"message": "x"}), headers=session.headers()
                )
                assert gone.status_code == 404
    assert layer.forwarded == 1
    assert answered[fast] == answered[usual] == []


async def test_a_session_with_a_call_passed_through_is_busy_for_the_session_limits() -> None:
    options = HttpOptions("127.0.0.1", 0, max_sessions=1)
    answered: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        async with (
            both_fronts(options) as (down, fast, _usual, layer),
            httpx2.AsyncClient() as http,
        ):
            busy = RawSession(http, fast, "2025-11-25")
            await busy.open()
            async with anyio.create_task_group() as tg:
                tg.start_soon(busy.answer_into, busy.call("d__wait", {}), answered, fast)
                await down.started.wait()
                refused = await http.post(
                    fast,
                    json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
                    headers={"accept": _ACCEPT},
                )
                assert refused.status_code == 503  # the only session is busy: not evicted
                assert await busy.delete() == 200
    assert layer.forwarded == 1
    assert answered[fast] == []


async def test_a_session_is_not_reached_with_another_credential() -> None:
    options = HttpOptions("127.0.0.1", 0, tokens=("token-a", "token-b"))
    with anyio.fail_after(30):
        async with (
            both_fronts(options) as (_, fast, _usual, layer),
            httpx2.AsyncClient(headers={"authorization": "Bearer token-a"}) as owner,
            httpx2.AsyncClient(headers={"authorization": "Bearer token-b"}) as other,
        ):
            session = RawSession(owner, fast, "2025-11-25")
            await session.open()
            call = session.call("d__echo", {"message": "mine"})
            stolen = await other.post(fast, json=call, headers=session.headers())
            listed = await other.post(
                fast,
                json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
                headers=session.headers(),
            )
            deleted = await other.delete(fast, headers=session.headers())
            mine = await session.post(call)
    assert (stolen.status_code, listed.status_code, deleted.status_code) == (404, 404, 404)
    assert mine[0]["result"]["content"] == [{"type": "text", "text": "mine"}]
    assert layer.forwarded == 1
