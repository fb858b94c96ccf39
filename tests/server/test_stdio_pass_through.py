"""Proxied calls of a 2025-era stdio client, passed straight through, answer as the SDK's
session path does.

The downstream server of `test_pass_through` over HTTP on 127.0.0.1, and two gateways in front
of it served as over stdio (`serve_pipes` on a socket pair), one with the pass-through and one
without. Clients of the handshake era: the SDK's `Client` in legacy mode, and raw JSON-RPC lines
for what only the wire shows (older protocol versions, a server's question and the client's
reply, a cancelled call that is never answered, the end of stdin, calls pipelined or written
with the `initialize`). Every call is answered alike by both gateways, and the first passed it
through (the HTTP twin: `test_pass_through_sessions`).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import result_text
from toolkits.mcp import McpServerConfig
from toolkits.mcp.config import ProtocolMode

from .proxying import (
    LEVELS_HEARD,
    ClientAnswers,
    answers_by_name,
    heard_at_levels,
    waiting_notice,
)
from .stdio_fronts import StdioFront, stdio_front
from .test_pass_through import CALLS, NODE_PROTOCOLS, Downstream, Heard, answered_each
from .test_pass_through_sessions import (
    ASKED,
    ASKING_TOOLS,
    check_asked,
    check_not_asked,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]


@asynccontextmanager
async def both_fronts(
    protocol: ProtocolMode = "auto",
) -> AsyncGenerator[tuple[Downstream, StdioFront, StdioFront]]:
    """The downstream, a gateway passing calls through and one that does not, both as over
    stdio; their node speaks `protocol` to the downstream, which declares logging
    (the clients set their levels)."""
    down = Downstream(logging=True)
    async with serve_on_loopback(down.app()) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=protocol)
        async with (
            stdio_front(config, pass_through=True) as fast,
            stdio_front(config, pass_through=False) as usual,
        ):
            assert fast.shortcut.passing is not None
            assert usual.shortcut.passing is None
            yield down, fast, usual


async def _sdk_answers(front: StdioFront, log_level: types.LoggingLevel | None) -> tuple[Any, ...]:
    logs = Heard()
    async with Client(
        front.client(), mode="legacy", logging_callback=logs.on_log, log_level=log_level
    ) as client:
        await client.list_tools()  # as clients do; a call before any listing takes the usual path
        answers = await answered_each(client, CALLS)
    return answers, logs.logs


@NODE_PROTOCOLS
async def test_calls_of_a_stdio_client_pass_through_and_answer_as_the_session_path_does(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            passed = await _sdk_answers(fast, "info")
            assert fast.forwarded == len(CALLS)
            assert passed == await _sdk_answers(usual, "info")
    answers, logs = passed
    by_name = answers_by_name(answers, logs, protocol=protocol)
    assert "_meta" not in by_name["d__echo"][0]  # handshake-era results carry no serverInfo


@NODE_PROTOCOLS
async def test_a_stdio_client_hears_the_levels_it_set_on_either_path(
    protocol: ProtocolMode,
) -> None:
    heard: list[list[list[str]]] = []
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            for front in (fast, usual):
                logs = Heard()
                async with Client(
                    front.client(), mode="legacy", logging_callback=logs.on_log
                ) as client:
                    await client.list_tools()
                    heard.append(await heard_at_levels(client, logs.logs))
            assert (fast.forwarded, usual.forwarded) == (3, 0)
    assert heard == [LEVELS_HEARD, LEVELS_HEARD]


class Raw:
    """A 2025-era client writing raw JSON-RPC lines to a front: what the wire carries."""

    def __init__(self, front: StdioFront) -> None:
        self.front = front
        self._ids = 0

    def request(self, method: str, params: JsonObject | None = None) -> JsonObject:
        self._ids += 1
        message: JsonObject = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        return message if params is None else {**message, "params": params}

    def call(self, name: str, arguments: JsonObject, **meta: Any) -> JsonObject:
        params: JsonObject = {"name": name, "arguments": arguments}
        return self.request("tools/call", {**params, "_meta": meta} if meta else params)

    def initialize(self, version: str, capabilities: JsonObject | None = None) -> JsonObject:
        client = {"name": "raw", "version": "1"}
        params = {
            "protocolVersion": version,
            "capabilities": capabilities or {},
            "clientInfo": client,
        }
        return self.request("initialize", params)

    async def open(
        self, version: str = "2025-11-25", capabilities: JsonObject | None = None
    ) -> None:
        """The handshake, then a listing: a call before any listing takes the usual path."""
        [answer] = await self.ask(self.initialize(version, capabilities))
        assert answer["result"]["protocolVersion"] == version
        await self.front.send(INITIALIZED)
        [listed] = await self.ask(self.request("tools/list"))
        assert "d__echo" in [tool["name"] for tool in listed["result"]["tools"]]

    async def ask(self, message: JsonObject) -> list[JsonObject]:
        await self.front.send(message)
        return await self.until(message["id"])

    async def until(self, request_id: object) -> list[JsonObject]:
        """The lines up to and including the response to `request_id`."""
        heard: list[JsonObject] = []
        while True:
            heard.append(message := await self.receive())
            if "method" not in message and message.get("id") == request_id:
                return heard

    async def receive(self) -> JsonObject:
        """The next line but the lists' changes: a 2026-07-28 node tells of them when its
        listen stream opens, whenever that is (`McpSession._listen_loop`), on no call's behalf."""
        while True:
            message = await self.front.receive()
            if not _list_changed(message):
                return message

    async def end(self) -> list[JsonObject]:
        """Close stdin: the lines written before the gateway stops (but the lists' changes)."""
        return [message for message in await self.front.end() if not _list_changed(message)]


def _list_changed(message: JsonObject) -> bool:
    return str(message.get("method", "")).endswith("/list_changed")


INITIALIZED: JsonObject = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def cancel(request_id: object) -> JsonObject:
    params = {"requestId": request_id, "reason": "enough"}
    return {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": params}


def text(response: JsonObject) -> str:
    return response["result"]["content"][0]["text"]


@NODE_PROTOCOLS
@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", "2025-03-26"])
async def test_the_wire_answer_of_a_call_is_the_sdks_in_every_handshake_version(
    version: str, protocol: ProtocolMode
) -> None:
    heard: dict[str, list[list[JsonObject]]] = {}
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                raw = Raw(front)
                await raw.open(version)
                heard[who] = [
                    await raw.ask(raw.call(name, arguments, progressToken=f"p-{name}"))
                    for name, arguments in CALLS
                ]
            assert fast.forwarded == len(CALLS)
    assert heard["fast"] == heard["usual"]
    steps = heard["fast"][CALLS.index(("d__steps", {"n": 3}))]
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
    [big] = heard["fast"][CALLS.index(("d__big", {"n": 3_000_000}))]
    assert text(big) == "x" * 3_000_000


async def _asked(
    protocol: ProtocolMode, tools: tuple[str, ...], *, roots_only: bool = False
) -> list[str]:
    """What `tools` answer (echoing "hi") to an SDK client that can be asked (all three
    capabilities, or roots only), through both fronts; their clients are asked alike, and
    every call passed through (`asked_on_both_paths`, over stdio)."""
    asked: dict[str, list[str]] = {}
    answers: dict[str, ClientAnswers] = {}
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                answers[who] = ClientAnswers()
                declared = answers[who].callbacks()
                if roots_only:
                    declared = {"list_roots_callback": declared["list_roots_callback"]}
                async with Client(front.client(), mode="legacy", **declared) as client:
                    await client.list_tools()
                    asked[who] = [
                        result_text(await client.call_tool(name, {"message": "hi"}))
                        for name in tools
                    ]
            assert fast.forwarded == len(tools)
    assert asked["fast"] == asked["usual"]
    for seen in ("elicited", "sampled", "roots_asked"):
        assert getattr(answers["fast"], seen) == getattr(answers["usual"], seen)
    return asked["fast"]


@NODE_PROTOCOLS
async def test_a_client_that_can_be_asked_is_asked_through_a_call_passed_through(
    protocol: ProtocolMode,
) -> None:
    check_asked(protocol, await _asked(protocol, ASKED))


@NODE_PROTOCOLS
async def test_what_the_client_did_not_declare_it_is_not_asked_as_on_the_session_path(
    protocol: ProtocolMode,
) -> None:
    tools = (*ASKING_TOOLS, "d__declared")
    check_not_asked(protocol, await _asked(protocol, tools, roots_only=True))


async def _answered_on_the_wire(
    raw: Raw, name: str, answer: Callable[[JsonObject], JsonObject]
) -> tuple[list[JsonObject], list[JsonObject]]:
    """Call `name` and reply to each question of its server with `answer(question)`: the
    lines up to the call's response, and the questions."""
    call = raw.call(name, {})
    await raw.front.send(call)
    heard: list[JsonObject] = []
    questions: list[JsonObject] = []
    while True:
        heard.append(message := await raw.receive())
        if "method" in message and "id" in message:
            questions.append(message)
            await raw.front.send({"jsonrpc": "2.0", "id": message["id"], **answer(message)})
        elif "method" not in message and message.get("id") == call["id"]:
            return heard, questions


async def test_a_question_on_the_wire_and_the_clients_refusal_passed_on() -> None:
    def refuse(_question: JsonObject) -> JsonObject:
        return {"error": {"code": -1, "message": "not now"}}

    def malformed(_question: JsonObject) -> JsonObject:
        return {"result": {"action": "perhaps"}}

    heard: dict[str, list[list[JsonObject]]] = {}
    asked: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(60):
        async with both_fronts() as (_, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                raw = Raw(front)
                await raw.open(capabilities={"elicitation": {}})
                for answer in (refuse, malformed):
                    lines, questions = await _answered_on_the_wire(raw, "d__ask", answer)
                    heard.setdefault(who, []).append(lines)
                    asked.setdefault(who, []).extend(questions)
            assert fast.forwarded == 2
    # The SDK numbers its questions; ours are strings it never uses.
    assert [type(q["id"]) for q in asked["fast"]] == [str, str]
    assert all(q["id"].startswith("agent-gateway-question-") for q in asked["fast"])
    assert [type(q["id"]) for q in asked["usual"]] == [int, int]
    for question in (*asked["fast"], *asked["usual"]):
        del question["id"]
    assert asked["fast"] == asked["usual"]
    assert asked["fast"][0]["method"] == "elicitation/create"
    assert [m[1:] for m in heard["fast"]] == [m[1:] for m in heard["usual"]]  # all but the question
    refused, broken = (text(m[-1]) for m in heard["fast"])
    assert refused == "could not ask: not now"
    assert broken == (  # in a line, as both paths say it (they gave pydantic's pages)
        "could not ask: elicitation/create refused: the upstream client's answer is malformed: "
        "action: Input should be 'accept', 'cancel' or 'decline'"
    )


async def test_a_form_question_comes_in_the_clients_era_shape() -> None:
    """Elicitation modes came with 2025-11-25: a 2025-06-18 client's form names no `mode`."""

    def decline(_question: JsonObject) -> JsonObject:
        return {"result": {"action": "decline"}}

    modes: dict[tuple[str, str], object] = {}
    with anyio.fail_after(60):
        for version in ("2025-06-18", "2025-11-25"):  # one connection each: one handshake
            async with both_fronts() as (_, fast, usual):
                for who, front in ("fast", fast), ("usual", usual):
                    raw = Raw(front)
                    await raw.open(version, capabilities={"elicitation": {}})
                    _, [question] = await _answered_on_the_wire(raw, "d__ask", decline)
                    modes[who, version] = question["params"].get("mode", "none")
    assert modes == {
        ("fast", "2025-06-18"): "none",
        ("fast", "2025-11-25"): "form",
        ("usual", "2025-06-18"): "none",
        ("usual", "2025-11-25"): "form",
    }


async def _after_a_cancel(raw: Raw) -> list[JsonObject]:
    """Up to the answer of a next call, then all the gateway writes before it stops."""
    after = await raw.ask(raw.call("d__echo", {"message": "still here"}))
    return after + await raw.end()


def _only_the_next_call_answered(heard: dict[str, list[JsonObject]], cancelled: JsonObject) -> None:
    """Both gateways wrote the same, and that is the next call's answer alone: the cancelled
    call was never answered."""
    assert heard["fast"] == heard["usual"]
    [answer] = heard["fast"]
    assert (answer["id"], text(answer)) == (cancelled["id"] + 1, "still here")


async def test_a_call_its_client_cancels_is_cancelled_at_the_server_and_never_answered() -> None:
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                down.started, down.cancelled = anyio.Event(), anyio.Event()
                raw = Raw(front)
                await raw.open()
                call = raw.call("d__wait", {})
                await front.send(call)
                await down.started.wait()
                await front.send(cancel(call["id"]))
                await down.cancelled.wait()
                heard[who] = await _after_a_cancel(raw)
            assert fast.forwarded == 2
    _only_the_next_call_answered(heard, call)


async def test_a_call_cancelled_while_its_question_waits_ends_as_on_the_session_path() -> None:
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                down.cancelled = anyio.Event()
                raw = Raw(front)
                await raw.open(capabilities={"elicitation": {}})
                call = raw.call("d__hesitate", {})
                await front.send(call)
                question = await raw.receive()
                assert question["method"] == "elicitation/create"
                await front.send(cancel(call["id"]))
                # The question is withdrawn, so its client may close the form it shows.
                withdrawn = await raw.receive()
                assert withdrawn["method"] == "notifications/cancelled"
                assert withdrawn["params"]["requestId"] == question["id"]
                late = {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "decline"}}
                await front.send(late)  # the answer comes too late
                await down.cancelled.wait()
                heard[who] = await _after_a_cancel(raw)
            assert fast.forwarded == 2
    _only_the_next_call_answered(heard, call)


async def test_at_the_end_of_stdin_a_call_in_flight_is_answered_a_cancelled_one_is_not() -> None:
    """The gateway stops once every call read is answered, a cancelled one excepted."""
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        async with both_fronts() as (down, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                down.started, down.cancelled, down.release = (anyio.Event() for _ in range(3))
                raw = Raw(front)
                await raw.open()
                held, wait = raw.call("d__held", {}), raw.call("d__wait", {})
                await front.send(held, wait)
                await down.started.wait()  # both read, `held` first
                await front.send(cancel(wait["id"]))
                await front.stream.send_eof()  # `held` in flight
                await down.cancelled.wait()
                down.release.set()
                heard[who] = await raw.end()  # up to the gateway's stop: its stdout ends
            assert fast.forwarded == 2
    assert heard["fast"] == heard["usual"]
    [answer] = heard["fast"]
    assert (answer["id"], text(answer)) == (held["id"], "released")


class AsksOnCue:
    """A server whose `ask` asks its client for a decision once `cue` is set."""

    def __init__(self) -> None:
        self.toy = ToyServer()
        self.toy.add_echo("echo")
        self.started, self.cue = anyio.Event(), anyio.Event()
        self.toy.add("ask", self._ask)

    async def _ask(self, ctx: Context, _args: JsonObject) -> types.CallToolResult:
        self.started.set()
        await self.cue.wait()
        schema: types.ElicitRequestedSchema = {"type": "object", "properties": {}}
        try:
            answer = await ctx.session.elicit_form("Go on?", schema, ctx.request_id)
        except MCPError as exc:
            return text_result(f"could not ask: {exc}")
        return text_result(f"the client said {answer.action}")


@pytest.mark.parametrize("asked", ["before", "after"])
async def test_at_the_end_of_stdin_a_question_to_the_client_is_refused_and_its_call_answered(
    asked: str,
) -> None:
    """Nothing the client might answer arrives once it closed stdin: a question waiting then
    (asked `before`), or asked `after`, is refused at once, alike on both paths, and the
    gateway stops, rather than wait for an answer for as long as a question may wait."""
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        for who, pass_through in ("fast", True), ("usual", False):
            down = AsksOnCue()
            app = down.toy.server.streamable_http_app(host="127.0.0.1")
            async with (
                serve_on_loopback(app) as base,
                stdio_front(McpServerConfig(url=f"{base}/mcp"), pass_through=pass_through) as front,
            ):
                raw = Raw(front)
                await raw.open(capabilities={"elicitation": {}})
                await front.send(raw.call("d__ask", {}))
                await down.started.wait()
                if asked == "before":
                    down.cue.set()
                    assert (await raw.receive())["method"] == "elicitation/create"
                await front.stream.send_eof()
                if asked == "after":
                    await anyio.wait_all_tasks_blocked()  # the gateway read the end
                    down.cue.set()
                heard[who] = await raw.end()  # up to the gateway's stop: its stdout ends
                assert front.forwarded == (1 if pass_through else 0)
    assert heard["fast"] == heard["usual"]
    [answer] = heard["fast"]
    assert text(answer) == "could not ask: the client closed its input"


async def test_calls_pipelined_on_one_connection_are_each_answered_once_and_rightly() -> None:
    """20 calls written at once, among listings the SDK answers: the answers interleave on
    stdout, each once, under its own id, with its own progress."""
    answered: dict[str, dict[object, JsonObject]] = {}
    progress: dict[str, dict[object, list[float]]] = {}
    with anyio.fail_after(60):
        async with both_fronts() as (_, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                raw = Raw(front)
                await raw.open()
                batch: list[JsonObject] = []
                for n in range(20):
                    if n % 5 == 0:
                        batch.append(raw.request("tools/list"))
                    steps = raw.call("d__steps", {"n": 2}, progressToken=f"p{n}")
                    batch.append(steps if n % 4 == 0 else raw.call("d__echo", {"message": f"m{n}"}))
                await front.send(*batch)
                ids = {m["id"] for m in batch}
                answered[who], progress[who] = await _answers(raw, ids)
                assert set(answered[who]) == ids
            assert fast.forwarded == 20
    assert answered["fast"] == answered["usual"]
    assert progress["fast"] == progress["usual"] == {f"p{n}": [1.0, 2.0] for n in range(0, 20, 4)}
    for request in batch:
        answer = answered["fast"][request["id"]]
        if request["method"] == "tools/list":
            assert "d__echo" in [tool["name"] for tool in answer["result"]["tools"]]
        else:
            message = request["params"]["arguments"].get("message")
            assert text(answer) == (message or "2 steps")


async def _answers(
    raw: Raw, ids: set[object]
) -> tuple[dict[object, JsonObject], dict[object, list[float]]]:
    """The responses to `ids` by id, each once (none comes again before the gateway stops),
    and the progress heard, by token."""
    answers: dict[object, JsonObject] = {}
    progress: dict[object, list[float]] = {}
    lines: list[JsonObject] = []
    while not ids <= {m.get("id") for m in lines if "method" not in m}:
        lines.append(await raw.receive())
    lines += await raw.end()
    for message in lines:
        if message.get("method") == "notifications/progress":
            params = message["params"]
            if waiting_notice(params.get("message")):
                continue  # the gateway's own, while the call waited for a slot
            progress.setdefault(params["progressToken"], []).append(params["progress"])
        elif "method" not in message:
            assert message["id"] not in answers, message
            answers[message["id"]] = message
    return answers, progress


async def test_a_call_written_with_the_initialize_it_follows_is_answered_rightly() -> None:
    """Read before the handshake is answered (and before any listing): the usual path's; the
    calls after a listing pass through."""
    heard: dict[str, list[JsonObject]] = {}
    with anyio.fail_after(30):
        async with both_fronts() as (_, fast, usual):
            for who, front in ("fast", fast), ("usual", usual):
                raw = Raw(front)
                call = raw.call("d__echo", {"message": "early"})
                await front.send(raw.initialize("2025-11-25"), INITIALIZED, call)
                heard[who] = await raw.until(call["id"])
                assert front.forwarded == 0
                await raw.ask(raw.request("tools/list"))
                heard[who] += await raw.ask(raw.call("d__echo", {"message": "later"}))
            assert fast.forwarded == 1
    assert heard["fast"] == heard["usual"]
    initialized, early, later = heard["fast"]
    assert initialized["result"]["protocolVersion"] == "2025-11-25"
    assert (text(early), text(later)) == ("early", "later")


async def test_a_fault_in_the_pass_through_answers_an_internal_error_and_the_client_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug past the server (here: shaping the result) is logged, the call gets JSON-RPC's
    internal error rather than no answer, and the connection serves on."""
    with anyio.fail_after(30):
        async with both_fronts() as (_, fast, _usual):
            passing = fast.shortcut.passing
            assert passing is not None
            raw = Raw(fast)
            await raw.open()

            def broken(result: JsonObject, version: str, node: str) -> JsonObject:
                raise RuntimeError("a bug")

            with monkeypatch.context() as patched:
                patched.setattr(passing, "for_client", broken)
                [failed] = await raw.ask(raw.call("d__echo", {"message": "lost"}))
            [answer] = await raw.ask(raw.call("d__echo", {"message": "next"}))
    assert failed["error"] == {"code": types.INTERNAL_ERROR, "message": "Internal error"}
    assert text(answer) == "next"
    assert "answering 'tools/call' past the server failed" in caplog.text
