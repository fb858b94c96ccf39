"""What a server's sampling requests during an agent's tool call may cost the run.

The agent's model answers them, so each one is a model call the run pays for: at most the
server's `max_sampling` per call (more are refused, with one warning), none above the
`maxTokens` the server asked for, none once the token budget is spent, and every one's usage
in the run's, even one that ends after the tool's result came back. A real subprocess server
(`tests/servers/sampling_flood.py`) asks; the model is an OpenAI-compatible provider on
`httpx.MockTransport`, answering in its real format.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp_types import CallToolResult

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from agent.models import ModelSettings, OpenAICompatibleModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.model_specs import resolve_model
from tests.server.support import SAMPLING_WITH_TOOLS, serve
from tests.servers.inprocess import ToyServer
from toolkits import CallContext
from toolkits.mcp import DEFAULT_MAX_SAMPLING, McpServerConfig, McpToolkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

FLOOD = Path(__file__).parent / "servers" / "sampling_flood.py"
Reply = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
"""What the provider answers a request body with: the message (a tool call, or text)."""


def completion(message: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenAI-compatible chat completion, as a llama.cpp or vLLM server answers."""
    finish = "tool_calls" if "tool_calls" in message else "stop"
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1750000000,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10},
    }


def tool_call(name: str, **arguments: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "tool_calls": [{"id": "c1", "type": "function", "function": function}],
    }


class Provider:
    """The agent's model: its first answer calls `tool`, a sampling request (a conversation
    of one user turn, no system prompt) is answered by `sampled`, any other with `done`.
    Records every request body."""

    def __init__(self, tool: dict[str, Any], sampled: Reply | None = None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self._tool = tool
        self._sampled = sampled

    def model(self, settings: ModelSettings | None = None) -> OpenAICompatibleModel:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self._handle))
        return OpenAICompatibleModel(
            "http://127.0.0.1:9/v1", "m", http_client=client, settings=settings
        )

    def observation(self) -> Any:
        """The tool's result (JSON text) as the model last read it."""
        tool = next(m for m in self.bodies[-1]["messages"] if m["role"] == "tool")
        return json.loads(tool["content"])

    @property
    def sampling_bodies(self) -> list[dict[str, Any]]:
        return [body for body in self.bodies if _is_sampling(body)]

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        if _is_sampling(body):
            text = body["messages"][0]["content"]
            message = (
                await self._sampled(body)
                if self._sampled is not None
                else {"role": "assistant", "content": f"answer to {text}"}
            )
        elif len(self.bodies) == 1:
            message = self._tool
        else:
            message = {"role": "assistant", "content": "done"}
        return httpx.Response(200, json=completion(message))


def call(name: str, **arguments: Any) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def _is_sampling(body: dict[str, Any]) -> bool:
    return body["messages"][0]["role"] == "user"  # the agent's own requests start with a system one


def flood_server(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command=sys.executable, args=[str(FLOOD)], **keys)


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_server_gets_at_most_max_sampling_answers_per_call_and_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider(tool_call("flood__ask_each", n=6, max_tokens=50))
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server(max_sampling=4)) as node:
            gateway = Gateway([node], [AgentSpec("a", provider.model(), tools=["flood"])])
            result = await gateway.run("a", "ask it", hooks=[record])

    assert result.output == "done"
    observed = provider.observation()  # the server's own account
    assert len(observed["answers"]) == 4
    assert (
        observed["refusals"]
        == [
            "sampling/createMessage refused: the agent's model answers at most 4 sampling "
            "requests per tool call (max_sampling in the gateway's config of this server)"
        ]
        * 2
    )
    assert len(provider.sampling_bodies) == 4
    assert result.usage.requests == 1 + 4 + 1
    warned = [w for w in _warnings(caplog) if "completions" in w]
    assert warned == [
        "MCP server 'flood' asked for more than 4 completions in one tool call: the agent's "
        "model answered 4, the rest are refused (raise the server's max_sampling to allow more)"
    ]
    notes = [e for e in events if e.kind == "tool" and e.phase == "note"]
    assert [e.output for e in notes] == [{"warning": warned[0]}]


async def test_the_default_cap_holds_against_a_flood() -> None:
    provider = Provider(tool_call("flood__flood", n=40, max_tokens=50))
    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server()) as node:
            gateway = Gateway([node], [AgentSpec("a", provider.model(), tools=["flood"])])
            result = await gateway.run("a", "flood it")
    assert result.output == "done"
    assert len(provider.sampling_bodies) == DEFAULT_MAX_SAMPLING == 10
    assert result.usage.requests == 1 + 10 + 1


@pytest.mark.parametrize(("agent_max", "sent"), [(None, 77), (5000, 77), (30, 30)])
async def test_the_servers_max_tokens_reach_the_model_within_the_agents_own(
    agent_max: int | None, sent: int
) -> None:
    provider = Provider(tool_call("flood__ask_each", n=2, max_tokens=77))
    model = provider.model(ModelSettings(max_tokens=agent_max))
    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server()) as node:
            gateway = Gateway([node], [AgentSpec("a", model, tools=["flood"])])
            result = await gateway.run("a", "ask it")
    assert result.output == "done"
    assert [body.get("max_tokens") for body in provider.sampling_bodies] == [sent, sent]
    # The agent's own requests keep its own setting.
    assert [body.get("max_tokens") for body in provider.bodies if not _is_sampling(body)] == [
        agent_max,
        agent_max,
    ]


async def test_a_server_allowed_no_sampling_is_refused_and_told_so_beforehand(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = Provider(tool_call("flood__ask_each", n=2))
    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server(max_sampling=0)) as node:
            gateway = Gateway([node], [AgentSpec("a", provider.model(), tools=["flood"])])
            await gateway.run("a", "ask it")
    assert provider.observation()["answers"] == []
    assert len(provider.observation()["refusals"]) == 2
    assert provider.sampling_bodies == []
    assert len([w for w in _warnings(caplog) if "completions" in w]) == 1

    # A 2026-07-28 server is told, with each call, what it may ask.
    server = ToyServer("caps")
    server.add_declared("declared")
    model = ScriptedModel([call("caps__declared"), "done"])
    config = McpServerConfig(command="in-process", protocol="modern", max_sampling=0)
    async with McpToolkit("caps", config, target=server.server) as node:
        await Gateway([node], [AgentSpec("a", model, tools=["caps"])]).run("a", "what may it ask?")
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert observed.content == repr({"elicitation": {"form": {}}})


class SaysWhenResultsCome(McpToolkit):
    """A node that sets `results_came` as each call's result comes back from its server."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.results_came = anyio.Event()

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, context: CallContext | None = None
    ) -> CallToolResult:
        result = await super().call_tool(name, arguments, context=context)
        self.results_came.set()
        return result


async def test_answers_still_going_when_the_tools_result_comes_are_withdrawn() -> None:
    """The server sent its result without waiting for its answers: they can serve nothing, and
    are withdrawn as the call ends (its questions go with it), not left to finish uncounted."""
    node = SaysWhenResultsCome("flood", flood_server())

    async def after_the_result(body: dict[str, Any]) -> dict[str, Any]:
        await node.results_came.wait()  # the server did not wait for this answer
        return {"role": "assistant", "content": "late"}

    provider = Provider(tool_call("flood__flood", n=3, max_tokens=50), after_the_result)
    with anyio.fail_after(30):
        async with node:
            spec = AgentSpec("a", provider.model(), tools=["flood"], token_budget=1000)
            gateway = Gateway([node], [spec])
            result = await gateway.run("a", "flood it")
    assert result.output == "done"
    assert len(provider.sampling_bodies) == 3  # asked, and none answered: nothing spent
    assert result.usage.requests == 1 + 1
    assert result.usage.total_tokens == 10 * 2


async def test_a_spent_token_budget_answers_no_more_sampling() -> None:
    # Each answer costs 10 tokens: the budget is spent after the tool call and two answers.
    provider = Provider(tool_call("flood__ask_each", n=5, max_tokens=50))
    spec = AgentSpec("a", provider.model(), tools=["flood"], token_budget=30)
    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server()) as node:
            result = await Gateway([node], [spec]).run("a", "ask it")
    # The run stopped on its budget with the tool's result: its steps keep it.
    observed = json.loads((result.items[0].steps or [])[0].observation)
    assert len(observed["answers"]) == 2
    assert (
        observed["refusals"]
        == ["sampling/createMessage refused: the agent's token budget is spent"] * 3
    )
    assert len(provider.sampling_bodies) == 2
    assert result.error == "Token budget (30) exceeded: the run used 30 tokens and was stopped."
    assert (result.usage.requests, result.usage.total_tokens) == (3, 30)


async def test_an_agent_on_the_clients_model_asks_it_with_the_servers_max_tokens() -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def client_model(
        context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResultWithTools:
        asked.append(params)
        if len(asked) == 1:  # the agent's first step: call the tool
            use = types.ToolUseContent(id="u1", name="flood__ask_each", input={"max_tokens": 77})
            content: list[types.SamplingMessageContentBlock] = [use]
        else:  # the server's question, then the agent's answer
            content = [types.TextContent(text=f"answer {len(asked)}")]
        return types.CreateMessageResultWithTools(
            role="assistant", content=content, model="client-model", stop_reason="endTurn"
        )

    with anyio.fail_after(30):
        async with McpToolkit("flood", flood_server()) as node:
            spec = AgentSpec("helper", resolve_model("sampling"), tools=["flood"])
            async with Client(
                serve(Gateway([node], [spec])),
                mode="legacy",
                sampling_callback=client_model,
                sampling_capabilities=SAMPLING_WITH_TOOLS,
            ) as client:
                result = await client.call_tool("helper", {"prompt": "ask it"})
    assert result.content == [types.TextContent(text="answer 3")]
    # The agent's own steps ask for the gateway's sampling_max_tokens; the server's question
    # for what the server asked.
    assert [params.max_tokens for params in asked] == [4096, 77, 4096]
    assert asked[1].messages[0].content == types.TextContent(text="question 1")
