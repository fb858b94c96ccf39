"""A tool's server asks for a completion mid-call: during an agent run, the agent's model answers."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage, UserMessage
from gateway import AgentSpec, Gateway, TraceEvent
from tests.servers.catalog import CatalogServer
from tests.servers.inprocess import ToyServer
from toolkits import McpServerConfig, McpToolkit
from toolkits.mcp import ProtocolMode

pytestmark = pytest.mark.anyio


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_the_agents_model_answers_its_tools_sampling_requests(era: ProtocolMode) -> None:
    server = CatalogServer("asker")
    # The agent's model: a tool call, then the server's question, then the final answer.
    model = ScriptedModel([call("asker__sample", text="name a colour"), "blue", "It said blue."])
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    config = McpServerConfig(command="in-process", protocol=era)
    async with McpToolkit("asker", config, target=server.server) as node:
        gateway = Gateway([node], [AgentSpec("a", model, tools=["asker"])])
        result = await gateway.run("a", "ask it", hooks=[record])

    assert result.output == "It said blue."
    question = model.calls[1][0]
    assert question == [UserMessage(content="name a colour")]
    observed = next(m for m in model.calls[2][0] if isinstance(m, ToolMessage))
    assert observed.content == "sampled 'blue' from scripted"
    assert result.usage.requests == 3  # the sampling answer counts toward the run
    tool_span = next(e for e in events if e.kind == "tool" and e.phase == "start")
    sampling = [e for e in events if e.kind == "model" and e.parent_id == tool_span.id]
    assert [e.phase for e in sampling] == ["start", "end"]


async def test_elicitation_during_an_agent_run_is_refused_with_the_reason() -> None:
    server = CatalogServer("asker")
    model = ScriptedModel([call("asker__elicit"), "nobody to ask"])
    config = McpServerConfig(command="in-process", protocol="legacy")
    async with McpToolkit("asker", config, target=server.server) as node:
        gateway = Gateway([node], [AgentSpec("a", model, tools=["asker"])])
        result = await gateway.run("a", "ask me")
    assert result.output == "nobody to ask"
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    assert "elicitation/create refused: the tool was called by an agent" in observed.content


async def test_an_agents_call_declares_to_a_modern_server_only_what_the_agent_answers() -> None:
    server = ToyServer("caps")
    server.add_declared("declared")
    model = ScriptedModel([call("caps__declared"), "done"])
    config = McpServerConfig(command="in-process", protocol="modern")
    async with McpToolkit("caps", config, target=server.server) as node:
        gateway = Gateway([node], [AgentSpec("a", model, tools=["caps"])])
        result = await gateway.run("a", "what may it ask?")
    assert result.output == "done"
    observed = next(m for m in model.calls[1][0] if isinstance(m, ToolMessage))
    # Text sampling (the agent's model) and form elicitation (approval questions): no sampling
    # with tools, no roots.
    assert observed.content == repr({"sampling": {}, "elicitation": {"form": {}}})
