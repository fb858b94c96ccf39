"""Streams of the OpenAI-compatible API over real HTTP on 127.0.0.1: a structured answer
streams once, as the JSON sent whole; a stream quiet while tools run gets keep-alive comments
(which clients skip); and a stored run that stops, or that the stopping server ends, is named
as an MCP client is told it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent import (
    FINAL_RESULT_TOOL,
    AgentOptions,
    AssistantMessage,
    ModelError,
    OutputSchema,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
)
from agent.models.openai import OpenAICompatibleModel
from gateway import AgentSpec, Gateway, RunResult
from gateway.config import GatewaySettings
from gateway.durable import RunInfo
from gateway.server import HttpOptions, build_server, http_app
from gateway.server.transports.draining import CUT_OFF, EndsCalls
from tests.servers.asgi import serve_on_loopback
from toolkits import FunctionToolkit, calculator, function_tool

from .support import Blocker, call
from .test_openai_api import (
    QUESTION,
    Tokens,
    contents,
    error_of,
    post,
    served,
    served_with_store,
    sse_data,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOTAL = OutputSchema.from_json_schema(
    {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
)
SHAPED = AgentOptions(output=TOTAL)


def shaped_gateway(*answers: ScriptedAnswer | str) -> Gateway:
    """`shaped` answers in the schema, with `answers` twice (a whole run, a streamed one)."""
    model = ScriptedModel([*answers, *answers])
    spec = AgentSpec("shaped", model, tools=["calculator"], options=SHAPED)
    return Gateway([FunctionToolkit("calculator", [calculator])], [spec])


ADDING = ScriptedAnswer(
    content="Let me add that up.",
    tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "1 + 2"})],
)


@pytest.mark.parametrize(
    "answers",
    [
        ['{"total":3}'],  # compact, as OpenAI's structured outputs write it
        ['{\n  "total": 3\n}'],  # pretty: written in many deltas
        ['```json\n{"total": 3}\n```'],  # fenced
        [call(FINAL_RESULT_TOOL, total=3)],
        [ADDING, '```json\n{"total": 3}\n```'],  # text before its tool call, then the answer
    ],
    ids=["compact", "pretty", "fenced", "final_result", "preamble"],
)
async def test_a_structured_answer_streams_once_as_the_json_sent_whole(
    answers: list[ScriptedAnswer | str],
) -> None:
    body: dict[str, Any] = {"model": "shaped", "messages": [QUESTION]}
    with anyio.fail_after(30):
        async with served(shaped_gateway(*answers)) as base:
            whole = await post(base, body)
            streamed = await post(base, {**body, "stream": True})
    answer = whole.json()["choices"][0]["message"]["content"]
    assert answer == '{"total": 3}'
    *events, done = sse_data(streamed.text)
    assert done == "[DONE]"
    said = "".join(contents(events))
    # Not the model's text and then the answer again: JSON a client parses as it would whole.
    assert said == answer
    assert json.loads(said) == {"total": 3}


async def test_a_structured_answer_cut_by_its_budget_streams_what_is_sent_whole() -> None:
    """The budget spent before the answer: the text so far, `length`, the same both ways."""
    spec = AgentSpec(
        "shaped",
        ScriptedModel([ADDING, ADDING]),
        tools=["calculator"],
        options=SHAPED,
        token_budget=3,
    )
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    body: dict[str, Any] = {"model": "shaped", "messages": [QUESTION]}
    with anyio.fail_after(30):
        async with served(gateway) as base:
            whole = await post(base, body)
            streamed = await post(base, {**body, "stream": True})
    choice = whole.json()["choices"][0]
    assert (choice["message"]["content"], choice["finish_reason"]) == (ADDING.content, "length")
    *events, done = sse_data(streamed.text)
    assert done == "[DONE]"
    assert "".join(contents(events)) == ADDING.content
    assert json.loads(events[-1])["choices"][0]["finish_reason"] == "length"


async def test_a_text_answer_handed_to_an_agent_with_a_schema_streams_its_json_once() -> None:
    """A lead without a schema streams its own text; the specialist's answer is its JSON."""
    passing = ScriptedAnswer(
        content="Passing you on.", tool_calls=[ScriptedCall(name="counter", arguments={})]
    )
    agents = [
        AgentSpec("triage", ScriptedModel([passing]), handoffs=["counter"]),
        AgentSpec("counter", ScriptedModel(['{"total":3}']), options=SHAPED),
    ]
    body = {"model": "triage", "messages": [QUESTION], "stream": True}
    with anyio.fail_after(30):
        async with served(Gateway([], agents)) as base:
            streamed = await post(base, body)
    *events, done = sse_data(streamed.text)
    assert done == "[DONE]"
    texts = contents(events)
    assert "".join(texts) == 'Passing you on.\n\n{"total": 3}'
    assert len([t for t in texts if t.strip() in ("Passing", "you", "on.")]) == 3  # word by word


class Watched:
    """The app, and an event set once a keep-alive comment went out on a stream."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.commented = anyio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def watching(message: Message) -> None:
            if message["type"] == "http.response.body" and message["body"].startswith(b":"):
                self.commented.set()
            await send(message)

        await self.app(scope, receive, watching)


def waiting_gateway(answers: int = 1) -> tuple[Gateway, anyio.Event]:
    """`slow` calls a tool that answers once the event is set, then answers "It is done."."""
    released = anyio.Event()

    async def wait_for_it() -> str:
        """Wait for the test."""
        await released.wait()
        return "done"

    model = ScriptedModel([call("wait_for_it"), "It is done."] * answers)
    spec = AgentSpec("slow", model, tools=["wait_for_it"])
    return Gateway([FunctionToolkit("wait_for_it", [function_tool(wait_for_it)])], [spec]), released


def keeping_alive(gateway: Gateway) -> Watched:
    """`serve --http`'s app with a keep-alive after 50 ms of quiet (`progress_interval`)."""
    server, _router = build_server(gateway, GatewaySettings(progress_interval=0.05))
    return Watched(http_app(server, HttpOptions("127.0.0.1", 0)))


async def test_a_stream_quiet_while_a_tool_runs_gets_keep_alive_comments() -> None:
    gateway, released = waiting_gateway()
    app = keeping_alive(gateway)
    body = {"model": "slow", "messages": [QUESTION], "stream": True}
    lines: list[str] = []
    with anyio.fail_after(30):
        async with serve_on_loopback(app) as base, httpx.AsyncClient(timeout=30) as http:
            url = f"{base}/v1/chat/completions"
            async with http.stream("POST", url, json=body) as response:
                async for line in response.aiter_lines():
                    lines.append(line)
                    if line == ": keep-alive":  # the tool still waits: only this was sent
                        released.set()
    assert response.status_code == 200
    assert lines.count(": keep-alive") >= 1
    data = [line.removeprefix("data: ") for line in lines if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    assert "".join(contents(data[:-1])) == "It is done."


async def test_an_openai_client_skips_the_keep_alive_comments() -> None:
    """Another gateway's provider (an OpenAI client) reads a stream that had comments."""
    gateway, released = waiting_gateway()
    app = keeping_alive(gateway)
    with anyio.fail_after(30):
        async with serve_on_loopback(app) as base, httpx.AsyncClient(timeout=30) as http:
            front = Gateway(
                [],
                [AgentSpec("front", OpenAICompatibleModel(f"{base}/v1", "slow", http_client=http))],
            )
            tokens = Tokens()
            results: list[RunResult] = []  # kept here: a task group's exit may swallow

            async def release() -> None:
                await app.commented.wait()  # the served run's tool waits for a comment
                released.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(release)
                results.append(await front.run("front", "?", stream=True, hooks=[tokens]))
    (result,) = results
    assert result.output == "It is done."
    assert "".join(tokens.texts) == "It is done."


class Unreachable:
    """A model whose server cannot be reached: a run it stops is `stopped`, resumable."""

    name = "unreachable"

    async def invoke(self, *_: object, **__: object) -> AssistantMessage:
        raise ModelError("cannot reach the model: ConnectError: All connection attempts failed")


@pytest.mark.parametrize("stream", [False, True])
async def test_a_stored_run_that_stops_is_named_as_stored_and_resumable(
    tmp_path: Path, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway([], [AgentSpec("dead", Unreachable())])
    body = {"model": "dead", "messages": [QUESTION], "stream": stream}
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, runs, _):
            response = await post(base, body)
            # No model call answered: a stream had not begun, and is answered as one not
            # streamed.
            assert response.status_code == 500
            assert response.headers["x-should-retry"] == "false"
            error = error_of(response)
            listed = await runs.list()
    (run,) = listed
    assert run.status == "stopped"
    assert error["code"] == "run_failed"
    said = error["message"]
    assert said.startswith("agent 'dead' stopped: cannot reach the model")
    assert f"Run {run.run_id} is stored where it stopped" in said
    assert f"agent-gateway runs resume {run.run_id}" in said
    assert "not stored" not in said
    resume = [r for r in caplog.records if "to continue it" in r.getMessage()]
    assert [r.levelno for r in resume] == [logging.WARNING]
    assert f"agent-gateway runs resume {run.run_id}" in resume[0].getMessage()


async def test_a_stored_run_the_stopping_server_ends_is_named_in_the_stream(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A single gateway's run is left stopped (no replica takes it over): the client is told
    its operator resumes it, and the log says how."""
    blocker = Blocker()
    spec = AgentSpec("blocked", ScriptedModel([call("wait_here")]), tools=["wait_here"])
    gateway = Gateway([blocker.node], [spec])
    body = {"model": "blocked", "messages": [QUESTION], "stream": True}
    answers: list[httpx.Response] = []
    kept: list[RunInfo] = []
    with anyio.fail_after(60):
        async with (
            served_with_store(gateway, tmp_path) as (base, runs, server),
            anyio.create_task_group() as tg,
        ):

            async def end_once_running() -> None:
                await blocker.started.wait()
                assert isinstance(server, EndsCalls)
                server.end_calls(CUT_OFF)

            tg.start_soon(end_once_running)
            answers.append(await post(base, body))
            kept.extend(await runs.list())
    (ended,) = answers
    (listed,) = kept
    *events, last = sse_data(ended.text)
    run_id = json.loads(events[0])["id"].removeprefix("chatcmpl-")
    said = json.loads(last)["error"]["message"]
    assert said.startswith(CUT_OFF)
    assert listed.run_id == run_id
    assert listed.status == "stopped"
    assert said.endswith(
        f"Run {run_id} is stored where it stopped: the gateway's operator can continue it "
        f"(agent-gateway runs resume {run_id})."
    )
    assert "goes on" not in said
    assert "Call again once the gateway is back" not in said
    resume = [r.getMessage() for r in caplog.records if "to continue it" in r.getMessage()]
    assert resume == [
        f"run {run_id} stopped: the gateway stopped before it ended; to continue it: "
        f"agent-gateway runs resume {run_id} --store sqlite:///{tmp_path / 'runs.sqlite'}"
    ]
