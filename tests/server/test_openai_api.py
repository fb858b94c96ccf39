"""The agents as an OpenAI-compatible Chat Completions API beside `/mcp`, over real HTTP on
127.0.0.1: read by our own OpenAI provider (a gateway as another gateway's model) and by raw
httpx for the wire format (chunk order and shape, `[DONE]`, usage, errors, tokens), and a
client that disconnects cancelling the run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import mcp_types as types
import pytest
from mcp import Client

from agent import (
    AgentOptions,
    AssistantMessage,
    ModelError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    UserMessage,
)
from agent.models.openai import OpenAICompatibleModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.approval import NOBODY_TO_ASK, ApprovalRule
from gateway.config import GatewaySettings
from gateway.durable import DurableRuns, open_runs
from gateway.server import HttpOptions, build_server, http_app
from gateway.server.transports.draining import Drains
from tests.servers.asgi import serve_on_loopback
from toolkits import FunctionToolkit, calculator

from .processes import TIMES_42, http_server, untimed, write_config
from .support import Blocker, call, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOKEN = "openai-api-test-token-1"
ANSWER = "The answer is forty two, as the helper said."


def helpful_gateway(*nodes: Any) -> tuple[Gateway, ScriptedModel, ScriptedModel]:
    """`assistant` asks its sub-agent `helper` (whose words are not the answer), then
    answers; `blocked` waits in a tool until cancelled."""
    asking = ScriptedAnswer(
        content="Let me ask.", tool_calls=[ScriptedCall(name="helper", arguments={"prompt": "?"})]
    )
    top = ScriptedModel([asking, ANSWER] * 2)  # two runs' answers
    helper = ScriptedModel(["Sub agent words here."] * 2)
    agents = [
        AgentSpec("assistant", top, tools=["helper"]),
        AgentSpec("helper", helper, description="Helps."),
        AgentSpec("blocked", ScriptedModel([call("wait_here")]), tools=["wait_here"]),
    ]
    return Gateway([FunctionToolkit("calculator", [calculator]), *nodes], agents), top, helper


@asynccontextmanager
async def served(gateway: Gateway, tokens: tuple[str, ...] = ()) -> AsyncGenerator[str]:
    """`serve --http`'s app for `gateway` on 127.0.0.1; yields its `/v1` base URL."""
    app = http_app(serve(gateway), HttpOptions("127.0.0.1", 0, tokens=tokens))
    async with serve_on_loopback(app) as base:
        yield f"{base}/v1"


def sse_data(body: str) -> list[str]:
    """The `data:` payloads of an event stream, in order."""
    assert body.endswith("\n\n")
    return [line.removeprefix("data: ") for line in body.split("\n\n") if line]


async def post(base: str, body: dict[str, Any], *, token: str | None = None) -> httpx.Response:
    headers = {"authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(timeout=30) as http:
        return await http.post(f"{base}/chat/completions", json=body, headers=headers)


QUESTION = {"role": "user", "content": "What is it?"}


async def test_a_streamed_answer_is_chunks_of_the_agents_own_text_then_stop_usage_done() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base:
            body = {
                "model": "assistant",
                "messages": [QUESTION],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
            response = await post(base, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    *events, done = sse_data(response.text)
    assert done == "[DONE]"
    chunks = [json.loads(e) for e in events]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["id"].startswith("chatcmpl-")
    assert {c["model"] for c in chunks} == {"assistant"}
    first, *deltas, last, usage = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    texts = [c["choices"][0]["delta"]["content"] for c in deltas]
    assert len(texts) > 2  # word by word, as the model wrote it
    # The preamble, a blank line, the answer; the sub-agent's words are not in it.
    assert "".join(texts) == f"Let me ask.\n\n{ANSWER}"
    assert all(c["choices"][0]["finish_reason"] is None for c in deltas)
    assert last["choices"] == [{"index": 0, "delta": {}, "finish_reason": "stop", "logprobs": None}]
    assert usage["choices"] == []
    # Both agents' model calls (word counts, as the scripted model counts tokens).
    assert usage["usage"]["completion_tokens"] == 3 + 1 + len(ANSWER.split()) + 4
    assert usage["usage"]["total_tokens"] == (
        usage["usage"]["prompt_tokens"] + usage["usage"]["completion_tokens"]
    )


def handing_gateway(billing: ScriptedModel, *, lead_answer: str = "It is 42.") -> Gateway:
    """`triage` says a word, then hands the conversation to `billing` (which may use the
    calculator, once); if that fails, it answers itself with `lead_answer`."""
    passing = ScriptedAnswer(
        content="Passing you on.", tool_calls=[ScriptedCall(name="billing", arguments={})]
    )
    agents = [
        AgentSpec("triage", ScriptedModel([passing, lead_answer]), handoffs=["billing"]),
        AgentSpec("billing", billing, tools=["calculator"], options=AgentOptions(max_iterations=1)),
    ]
    return Gateway([FunctionToolkit("calculator", [calculator])], agents)


async def streamed(gateway: Gateway) -> list[str]:
    """The `data:` payloads of a streamed answer of `triage`."""
    with anyio.fail_after(30):
        async with served(gateway) as base:
            body = {"model": "triage", "messages": [QUESTION], "stream": True}
            response = await post(base, body)
    assert response.status_code == 200
    return sse_data(response.text)


def contents(events: list[str]) -> list[str]:
    return [
        c["choices"][0]["delta"].get("content", "")
        for c in map(json.loads, events)
        if c.get("choices")
    ]


async def test_a_handed_off_answer_streams_as_the_answer() -> None:
    *events, done = await streamed(handing_gateway(ScriptedModel([ANSWER])))
    assert done == "[DONE]"
    texts = contents(events)
    assert texts[0] == ""  # the role's chunk
    # The specialist's answer word by word, not whole at the end.
    assert [t for t in texts if t][-1] == ANSWER.split()[-1]
    assert len([t for t in texts if t.strip() in ANSWER.split()]) == len(ANSWER.split())
    assert "".join(texts) == f"Passing you on.\n\n{ANSWER}"  # once
    assert json.loads(events[-1])["choices"][0]["finish_reason"] == "stop"


async def test_a_handoff_that_failed_mid_answer_ends_the_stream_with_why() -> None:
    cut = ScriptedAnswer(content="Your second charge was", stop_reason="max_tokens")
    events = await streamed(handing_gateway(ScriptedModel([cut])))
    assert "[DONE]" not in events
    *chunks, last = events
    # What was sent stays, and no other answer follows it.
    assert "".join(contents(chunks)) == "Passing you on.\n\nYour second charge was"
    error = json.loads(last)["error"]
    assert error["code"] == "handoff_failed"
    assert error["message"].startswith(
        "agent 'triage' handed the conversation to 'billing', whose answer had begun streaming"
    )
    assert "cut off" in error["message"]


async def test_a_handoff_that_failed_after_a_preamble_is_followed_by_the_leads_answer() -> None:
    adding = ScriptedAnswer(
        content="Let me add that up.",
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "1 + 1"})],
    )  # then max_iterations: its item fails
    *events, done = await streamed(handing_gateway(ScriptedModel([adding])))
    assert done == "[DONE]"
    said = "".join(contents(events))
    assert said == "Passing you on.\n\nLet me add that up.\n\nIt is 42."


async def test_without_include_usage_a_stream_has_no_usage_chunk() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base:
            body = {"model": "assistant", "messages": [QUESTION], "stream": True}
            response = await post(base, body)
    *events, done = sse_data(response.text)
    assert done == "[DONE]"
    last = json.loads(events[-1])
    assert last["choices"][0]["finish_reason"] == "stop"
    assert all("usage" not in json.loads(e) for e in events)


async def test_a_whole_answer_is_a_chat_completion_with_usage_and_the_conversation_as_history() -> (
    None
):
    gateway, top, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base:
            messages = [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello!"},
                {"role": "user", "content": [{"type": "text", "text": "What is it?"}]},
            ]
            response = await post(base, {"model": "assistant", "messages": messages})
    assert response.status_code == 200
    answer = response.json()
    assert answer["object"] == "chat.completion"
    assert answer["model"] == "assistant"
    assert answer["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": ANSWER, "refusal": None},
            "finish_reason": "stop",
            "logprobs": None,
        }
    ]
    assert answer["usage"]["completion_tokens"] == 3 + 1 + len(ANSWER.split()) + 4
    sent, _tools = top.calls[0]
    assert isinstance(sent[0], SystemMessage)
    assert sent[0].content.endswith("Be brief.")
    assert sent[1:] == [
        UserMessage(content="Hi"),
        AssistantMessage(content="Hello!"),
        UserMessage(content="What is it?"),
    ]


async def test_the_runs_context_is_the_requests_context_field() -> None:
    model = ScriptedModel(["Hello Ada."])
    options = AgentOptions(system_message="You help {{ context.customer.name }}.")
    gateway = Gateway([], [AgentSpec("assistant", model, options=options)])
    body: dict[str, Any] = {"model": "assistant", "messages": [QUESTION]}
    with anyio.fail_after(30):
        async with served(gateway) as base:
            response = await post(base, {**body, "context": {"customer": {"name": "Ada"}}})
            unread = await post(base, body)
    assert response.status_code == 200
    assert response.json()["choices"][0]["message"]["content"] == "Hello Ada."
    sent, _tools = model.calls[0]
    assert sent[0] == SystemMessage(content="You help Ada.")
    assert unread.status_code == 500  # without it, the instructions have nothing to read
    assert "the system message uses {{ context.customer.name }}" in error_of(unread)["message"]
    assert len(model.calls) == 1


async def test_models_lists_the_agents() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            listed = (await http.get(f"{base}/models")).json()
            one = await http.get(f"{base}/models/helper")
            none = await http.get(f"{base}/models/nobody")
    assert listed["object"] == "list"
    assert [m["id"] for m in listed["data"]] == ["assistant", "helper", "blocked"]
    assert {m["object"] for m in listed["data"]} == {"model"}
    assert one.json()["id"] == "helper"
    assert none.status_code == 404


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{not json", "not JSON"),
        (b'{"model": "assistant"}', "messages: Field required"),
        (b'{"model": "assistant", "messages": []}', "messages: List should have at least 1"),
        (
            b'{"model": "assistant", "messages": [{"role": "assistant", "content": "x"}]}',
            "the last message is the question, from role 'user'",
        ),
        (
            b'{"model": "assistant", "messages": [{"role": "user", "content": "  "}]}',
            "the question is empty",
        ),
        (
            b'{"model": "assistant", "messages": [{"role": "user", "content": '
            b'[{"type": "image_url", "image_url": {"url": "data:,"}}]}]}',
            "a part of type 'image_url' cannot be read",
        ),
        (
            b'{"model": "assistant", "messages": [{"role": "tool", "content": "1", '
            b'"tool_call_id": "c"}, {"role": "user", "content": "hi"}]}',
            "messages.0: role 'tool' cannot be read",
        ),
        (
            b'{"model": "assistant", "messages": [{"role": "user", "content": "hi"}, {"role": '
            b'"assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", '
            b'"function": {"name": "f", "arguments": "{}"}}]}, {"role": "user", "content": "?"}]}',
            "messages.1: tool calls cannot be read",
        ),
        (
            b'{"model": "assistant", "n": 2, "messages": [{"role": "user", "content": "hi"}]}',
            "one answer per request",
        ),
        (
            b'{"model": "assistant", "context": ["Ada"], '
            b'"messages": [{"role": "user", "content": "hi"}]}',
            "context: Input should be a valid dictionary",
        ),
        (
            b'{"model": "assistant", "tool_choice": "required", "messages": [{"role": "user", '
            b'"content": "hi"}]}',
            "tool_choice: the agent runs its own tools and answers in text",
        ),
        (
            b'{"model": "assistant", "tool_choice": {"type": "function", "function": {"name": '
            b'"f"}}, "messages": [{"role": "user", "content": "hi"}]}',
            "cannot call the tool asked for",
        ),
    ],
)
async def test_a_bad_request_is_refused_400_saying_what_is_wrong(body: bytes, said: str) -> None:
    gateway, top, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            response = await http.post(f"{base}/chat/completions", content=body)
    assert response.status_code == 400
    error = error_of(response)
    assert said in error["message"]
    assert error["type"] == "invalid_request_error"
    assert top.calls == []  # nothing ran


async def test_a_clients_tools_are_not_the_agents_and_a_call_of_one_is_not_asked() -> None:
    """A client's `tools` are not offered to the agent's model (it has its own), `tool_choice`
    "auto" is answered in text, and one that asks for a call of the client's tool is refused."""
    gateway, top, _ = helpful_gateway()
    weather: dict[str, Any] = {"type": "function", "function": {"name": "get_weather"}}
    body: dict[str, Any] = {"model": "assistant", "messages": [QUESTION], "tools": [weather]}
    with anyio.fail_after(30):
        async with served(gateway) as base:
            auto = await post(base, {**body, "tool_choice": "auto"})
            required = await post(base, {**body, "tool_choice": "required"})
    assert auto.json()["choices"][0]["message"]["content"] == ANSWER
    assert [tool.name for tool in top.calls[0][1]] == ["helper"]
    assert required.status_code == 400
    assert error_of(required)["param"] == "tool_choice"
    assert len(top.calls) == 2  # the one run: the refused request ran nothing


async def test_an_unknown_model_is_404_naming_the_agents() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway) as base:
            response = await post(base, {"model": "gpt-4o", "messages": [QUESTION]})
    assert response.status_code == 404
    error = error_of(response)
    assert error["code"] == "model_not_found"
    assert error["param"] == "model"
    assert "assistant, helper, blocked" in error["message"]


async def test_the_mcp_endpoints_bearer_tokens_guard_the_api() -> None:
    gateway, top, _ = helpful_gateway()
    body = {"model": "assistant", "messages": [QUESTION]}
    with anyio.fail_after(30):
        async with served(gateway, tokens=(TOKEN,)) as base, httpx.AsyncClient() as http:
            none = await post(base, body)
            wrong = await post(base, body, token="not-the-token-at-all")
            models = await http.get(f"{base}/models")
            right = await post(base, body, token=TOKEN)
    for refused in (none, wrong, models):
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"] == "Bearer"
        assert error_of(refused)["type"] == "authentication_error"
    assert right.status_code == 200
    assert len(top.calls) == 2  # the one run with the token


async def test_a_failed_run_is_500_not_to_be_retried() -> None:
    gateway = Gateway([], [AgentSpec("short", ScriptedModel([]))])  # no answer to give
    with anyio.fail_after(30):
        async with served(gateway) as base:
            whole = await post(base, {"model": "short", "messages": [QUESTION]})
            streamed = await post(base, {"model": "short", "messages": [QUESTION], "stream": True})
    assert whole.status_code == 500
    assert whole.headers["x-should-retry"] == "false"
    error = error_of(whole)
    assert error["type"] == "server_error"
    assert error["code"] == "run_failed"
    assert "agent 'short'" in error["message"]
    # No model call answered: the stream had not begun, and is answered as one not streamed.
    assert streamed.status_code == 500
    assert streamed.headers["x-should-retry"] == "false"
    assert error_of(streamed)["code"] == "run_failed"


async def test_a_providers_context_length_exceeded_is_passed_on_as_such() -> None:
    """A model that does not report its window (OpenAI's) refuses the conversation itself,
    400 `context_length_exceeded`: this gateway's clients are told so by that code too, here
    through two gateways, the front's agent on the back's `/v1`."""
    back = Gateway([], [AgentSpec("small", ScriptedModel(["never sent"]), context_window=50)])
    long = {"role": "user", "content": "Why? " * 200}
    with anyio.fail_after(30):
        async with served(back) as base, httpx.AsyncClient(timeout=30) as http:
            model = OpenAICompatibleModel(base, "small", http_client=http)
            front = Gateway([], [AgentSpec("front", model)])
            async with served(front) as front_base:
                whole = await post(front_base, {"model": "front", "messages": [long]})
    assert whole.status_code == 400
    error = error_of(whole)
    assert error["code"] == "context_length_exceeded"
    assert error["param"] == "messages"
    assert "would not fit the model's context window of 50 tokens" in error["message"]


async def test_a_stream_that_began_ends_with_its_runs_failure_as_its_last_event() -> None:
    """A model call answered (a tool call): the stream began, and its run's failure after
    that (the model's script ran out) is its last event."""
    model = ScriptedModel([call("calculator", expression="1 + 2")])
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [AgentSpec("once", model)])
    body = {"model": "once", "messages": [QUESTION], "stream": True}
    with anyio.fail_after(30):
        async with served(gateway) as base:
            streamed = await post(base, body)
    assert streamed.status_code == 200
    first, *_, last = sse_data(streamed.text)
    assert json.loads(first)["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert json.loads(last)["error"]["code"] == "run_failed"


async def test_a_conversation_over_the_context_window_is_openais_400_to_trim_and_retry() -> None:
    """It was a 500 `run_failed`: clients (the openai SDKs, LangChain) key on OpenAI's 400
    `context_length_exceeded` to trim the conversation and ask again. A stream is answered
    the same way: it begins once a model call answered. An MCP client is told the window."""
    model = ScriptedModel(["never sent"] * 3)
    gateway = Gateway([], [AgentSpec("small", model, context_window=50)])
    long = {"role": "user", "content": "Why? " * 200}
    with anyio.fail_after(30):
        async with served(gateway) as base:
            whole = await post(base, {"model": "small", "messages": [long]})
            streamed = await post(base, {"model": "small", "messages": [long], "stream": True})
        async with Client(serve(gateway)) as client:
            over_mcp = await client.call_tool("small", {"prompt": long["content"]})
    assert model.calls == []  # never sent
    assert whole.status_code == 400
    assert "x-should-retry" not in whole.headers
    error = error_of(whole)
    assert error | {"message": ""} == {
        "message": "",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    assert "would not fit the model's context window of 50 tokens" in error["message"]
    assert streamed.status_code == 400
    assert streamed.json() == {"error": error}
    assert over_mcp.is_error
    (said,) = over_mcp.content
    assert isinstance(said, types.TextContent)
    assert said.text.startswith("agent 'small' failed: ")
    assert "would not fit the model's context window of 50 tokens" in said.text


async def test_a_client_that_disconnects_cancels_the_run() -> None:
    blocker = Blocker()
    gateway, _, _ = helpful_gateway(blocker.node)
    body = {"model": "blocked", "messages": [QUESTION], "stream": True}
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            async with http.stream("POST", f"{base}/chat/completions", json=body) as response:
                assert response.status_code == 200
                await blocker.started.wait()
            # The response closed unread: the connection with it.
            await blocker.cancelled.wait()


class Tokens:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def __call__(self, event: TraceEvent) -> None:
        if event.phase == "token" and isinstance(event.output, dict):
            text = event.output.get("text")
            assert isinstance(text, str)
            self.texts.append(text)


def remote(
    base: str, agent: str, http: httpx.AsyncClient, token: str | None = TOKEN
) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base, agent, api_key=token, http_client=http)


async def test_a_gateway_is_another_gateways_model_streamed_and_whole() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway, tokens=(TOKEN,)) as base, httpx.AsyncClient() as http:
            front = Gateway([], [AgentSpec("front", remote(base, "assistant", http))])
            tokens = Tokens()
            streamed = await front.run("front", "What is it?", stream=True, hooks=[tokens])
            whole = await front.run("front", "What is it?")
    assert streamed.output == f"Let me ask.\n\n{ANSWER}"
    assert len(tokens.texts) > 2
    assert "".join(tokens.texts) == streamed.output
    assert whole.output == ANSWER
    for result in (streamed, whole):  # the served run's usage, both its agents' calls
        assert result.usage.output_tokens == 3 + 1 + len(ANSWER.split()) + 4
        assert result.usage.requests == 1  # one request to this model


async def test_our_provider_reads_the_apis_refusals() -> None:
    gateway, _, _ = helpful_gateway()
    with anyio.fail_after(30):
        async with served(gateway, tokens=(TOKEN,)) as base, httpx.AsyncClient() as http:
            unknown = remote(base, "nobody", http)
            unauthorised = remote(base, "assistant", http, token="not-the-token-at-all")
            problems: list[str] = []
            for model in (unknown, unauthorised):
                with pytest.raises(ModelError) as raised:
                    await model.invoke([UserMessage(content="hi")], [])
                problems.append(str(raised.value))
    assert "the model 'nobody' does not exist" in problems[0]
    assert "a valid bearer token is required" in problems[1]


@asynccontextmanager
async def served_with_store(
    gateway: Gateway, tmp_path: Path
) -> AsyncGenerator[tuple[str, DurableRuns, Any]]:
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        runs.use(gateway)
        server, _router = build_server(gateway, GatewaySettings(), runs=runs)
        async with serve_on_loopback(http_app(server, HttpOptions("127.0.0.1", 0))) as base:
            yield f"{base}/v1", runs, server


async def test_a_stored_runs_answer_streams_and_comes_whole_too(tmp_path: Path) -> None:
    gateway, top, _ = helpful_gateway()
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, runs, _):
            body = {"model": "assistant", "messages": [QUESTION], "stream": True}
            streamed = await post(base, body)
            earlier = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
            whole = await post(base, {**body, "messages": [*earlier, QUESTION], "stream": False})
            # The stored run's item kept the conversation: its model read it.
            assert top.calls[2][0][1:3] == [
                UserMessage(content="Hi"),
                AssistantMessage(content="Yo"),
            ]
            *events, done = sse_data(streamed.text)
            chunks = [json.loads(e) for e in events]
            for answer in (chunks[0], whole.json()):
                run_id = answer["id"].removeprefix("chatcmpl-")
                assert (await runs.get(run_id)).status == "succeeded"
    assert done == "[DONE]"
    texts = [c["choices"][0]["delta"].get("content", "") for c in chunks]
    assert "".join(texts) == f"Let me ask.\n\n{ANSWER}"
    assert whole.json()["choices"][0]["message"]["content"] == ANSWER


async def test_a_stored_runs_handed_off_answer_streams_and_is_stored_as_its_answer(
    tmp_path: Path,
) -> None:
    gateway = handing_gateway(ScriptedModel([ANSWER]))
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, runs, _):
            body = {"model": "triage", "messages": [QUESTION], "stream": True}
            response = await post(base, body)
            *events, done = sse_data(response.text)
            run_id = json.loads(events[0])["id"].removeprefix("chatcmpl-")
            run = await runs.get(run_id)
            assert run.status == "succeeded"
            result = await runs.result(run_id)
    assert done == "[DONE]"
    texts = contents(events)
    assert [t for t in texts if t][-1] == ANSWER.split()[-1]  # word by word, to its end
    assert "".join(texts) == f"Passing you on.\n\n{ANSWER}"
    assert result is not None
    assert result.output == ANSWER  # the stored answer, the lead's words not in it
    assert result.items[0].handoff == "billing"


async def test_a_stored_run_whose_client_disconnects_stops_and_stays_resumable(
    tmp_path: Path,
) -> None:
    blocker = Blocker()
    gateway, _, _ = helpful_gateway(blocker.node)
    body = {"model": "blocked", "messages": [QUESTION], "stream": True}
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, runs, server):
            async with (
                httpx.AsyncClient() as http,
                http.stream("POST", f"{base}/chat/completions", json=body) as response,
            ):
                lines = response.aiter_lines()  # kept: a dropped iterator closes the response
                first = json.loads((await anext(lines)).removeprefix("data: "))
                await blocker.started.wait()
            await blocker.cancelled.wait()
            await server.calls_ended()  # the request has unwound, and the run with it
            run_id = first["id"].removeprefix("chatcmpl-")
            info = await runs.get(run_id)
            # As when an MCP client cancels its call: stopped, stored, resumable.
            assert (info.status, info.error) == ("stopped", "interrupted")
            assert (await runs.resumable(run_id)).run_id == run_id


async def test_a_body_over_the_limit_is_413_and_runs_nothing() -> None:
    gateway, top, _ = helpful_gateway()
    server, _router = build_server(gateway, GatewaySettings(max_request_bytes=2048))
    big = {"model": "assistant", "messages": [{"role": "user", "content": "x" * 4096}]}
    with anyio.fail_after(30):
        async with serve_on_loopback(http_app(server, HttpOptions("127.0.0.1", 0))) as base:
            response = await post(f"{base}/v1", big)
    assert response.status_code == 413
    assert "over 2048 bytes" in error_of(response)["message"]
    assert top.calls == []


async def test_a_server_that_stops_refuses_new_runs_with_503() -> None:
    gateway, top, _ = helpful_gateway()
    server, _router = build_server(gateway, GatewaySettings())
    with anyio.fail_after(30):
        async with serve_on_loopback(http_app(server, HttpOptions("127.0.0.1", 0))) as base:
            assert isinstance(server, Drains)
            server.refuse_calls("The gateway is shutting down.")
            response = await post(f"{base}/v1", {"model": "assistant", "messages": [QUESTION]})
    assert response.status_code == 503
    assert error_of(response)["message"].startswith("The gateway is shutting down.")
    assert top.calls == []


async def test_a_proxy_without_agents_says_nothing_of_an_openai_api(tmp_path: Path) -> None:
    """Serving the servers' tools alone, `/v1` has no agent to serve: no line offers it."""
    config = tmp_path / "proxy.toml"
    config.write_text(
        '[gateway]\nexpose_tools = true\n[tools.calculator]\nbuiltin = "calculator"\n'
    )
    async with http_server(config) as served:
        served.process.terminate()  # after its ready line: what it says next is its stopping
        with anyio.fail_after(30):
            await served.stderr_closed.wait()
    said = [untimed(line) for line in served.stderr]
    assert said[0].startswith("agent-gateway: serving MCP on http://127.0.0.1:"), said
    assert not any("OpenAI" in line for line in said), said
    assert said[1].startswith("agent-gateway: stopping;"), said


async def test_serve_http_serves_the_api_and_says_where(tmp_path: Path) -> None:
    """A real `agent-gateway serve --http` process, streamed to as `curl -N` would."""
    config = write_config(tmp_path, TIMES_42)
    body = {"model": "assistant", "messages": [QUESTION], "stream": True}
    async with http_server(config) as served:
        base = served.url.removesuffix("/mcp") + "/v1"
        said = await served.line_starting("agent-gateway: serving the agents to OpenAI")
        response = await post(base, body)
    assert untimed(said) == f"agent-gateway: serving the agents to OpenAI clients at {base}"
    *events, done = sse_data(response.text)
    assert done == "[DONE]"
    texts = [json.loads(e)["choices"][0]["delta"].get("content", "") for e in events]
    assert "".join(texts) == "It is 42."
    assert len([t for t in texts if t]) == 3


async def test_an_unstored_run_refuses_a_call_that_needs_approval_saying_what_would_wait() -> None:
    """No run store to wait in and no client to ask: the model is told the serving remedy
    (`NOBODY_TO_ASK`), not a program's (`approver=`), and nothing runs."""
    wants = ScriptedModel([call("calculator", expression="6 * 7"), "I could not."])
    spec = AgentSpec("careful", wants, tools=["calculator"], approval=ApprovalRule(["*"]))
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    with anyio.fail_after(30):
        async with served(gateway) as base:
            answer = (await post(base, {"model": "careful", "messages": [QUESTION]})).json()
    assert answer["choices"][0]["message"]["content"] == "I could not."
    [told] = [m.content for m in wants.calls[1][0] if isinstance(m, ToolMessage)]
    assert told == f"Error: {NOBODY_TO_ASK}"


async def test_a_stored_run_waiting_for_approval_answers_with_its_handle(tmp_path: Path) -> None:
    wants = ScriptedModel([call("calculator", expression="6 * 7"), "It is 42."])
    spec = AgentSpec("careful", wants, tools=["calculator"], approval=ApprovalRule(["*"]))
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    body = {"model": "careful", "messages": [QUESTION]}
    with anyio.fail_after(60):
        async with served_with_store(gateway, tmp_path) as (base, runs, _):
            answer = (await post(base, body)).json()
            run_id = answer["id"].removeprefix("chatcmpl-")
            assert (await runs.get(run_id)).status == "waiting_approval"
    said = answer["choices"][0]["message"]["content"]
    assert said.startswith(f"Run {run_id} is waiting for a person's approval of:")
    assert 'calculator {"expression": "6 * 7"}' in said
    assert answer["usage"]["completion_tokens"] == 1  # the model call that asked for it


class Broken:
    """A model with a bug of its own."""

    name = "broken"

    async def invoke(self, *_: object, **__: object) -> AssistantMessage:
        raise RuntimeError("a bug in the model")


async def test_a_bug_in_a_run_is_a_500_and_the_server_serves_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gateway, _, _ = helpful_gateway()
    gateway.agents["broken"] = AgentSpec("broken", Broken())
    with anyio.fail_after(30):
        async with served(gateway) as base:
            failed = await post(base, {"model": "broken", "messages": [QUESTION]})
            answered = await post(base, {"model": "assistant", "messages": [QUESTION]})
    assert failed.status_code == 500
    said = error_of(failed)["message"]
    assert said == "agent 'broken' failed: RuntimeError: a bug in the model"
    assert "agent 'broken' crashed" in caplog.text
    assert answered.json()["choices"][0]["message"]["content"] == ANSWER


async def test_a_callers_runs_keep_to_its_share_of_the_nodes() -> None:
    """`max_concurrency = 1`: a caller's second run waits for the node while its first holds
    the slot, as a 2026-07-28 MCP client's calls from one address do."""
    blocker = Blocker()
    holding = AgentSpec("blocked", ScriptedModel([call("wait_here")] * 2), tools=["wait_here"])
    gateway = Gateway([blocker.node], [holding], max_concurrency=1)
    body = {"model": "blocked", "messages": [QUESTION], "stream": True}
    limit = gateway.node_limit("wait_here")
    with anyio.fail_after(30):
        async with served(gateway) as base, httpx.AsyncClient() as http:
            url = f"{base}/chat/completions"
            async with http.stream("POST", url, json=body), http.stream("POST", url, json=body):
                await blocker.started.wait()
                while sum(share.waiting for share in limit.waiting) < 1:
                    await anyio.lowlevel.checkpoint()
