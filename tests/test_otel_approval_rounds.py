"""A served run's call waiting for its MCP client's approval is an `await_approval` span in
either era: asked during the call (2025-11-25), the span lasts till the client answers; asked in
an input-required round (2026-07-28), the round's run waits till it stops, as a `--no-wait`
run does, and the retry that answers is the decision."""

from __future__ import annotations

import time

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRule
from gateway.otel import OtelExporter
from tests.server.support import serve
from toolkits import FunctionToolkit, function_tool

pytestmark = pytest.mark.anyio


def erase(text: str) -> str:
    """Erase a text."""
    return f"erased {text}"


class Person:
    """The client's user, approving each question; when it was asked and answered (ns)."""

    def __init__(self) -> None:
        self.asked: list[int] = []
        self.answered: list[int] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(time.time_ns())
        answer = types.ElicitResult(action="accept", content={"approve": True})
        self.answered.append(time.time_ns())
        return answer


async def served_run(era: str) -> tuple[list[ReadableSpan], Person]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    call = ScriptedCall(name="erase", id="b", arguments={"text": "B"})
    model = ScriptedModel([ScriptedAnswer(tool_calls=[call]), "done"])
    spec = AgentSpec("assistant", model, tools=["log"], approval=ApprovalRule(["erase"]))
    nodes = [FunctionToolkit("log", [function_tool(erase)])]
    gateway = Gateway(nodes, [spec], hooks=[OtelExporter(provider)])
    person = Person()
    async with Client(serve(gateway), mode=era, elicitation_callback=person) as client:
        result = await client.call_tool("assistant", {"prompt": "go"})
    assert result.content == [types.TextContent(text="done")]
    return list(memory.get_finished_spans()), person


def waits(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return sorted(
        (s for s in spans if s.name == "await_approval erase"), key=lambda s: s.start_time or 0
    )


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan:
    assert span.parent is not None
    return next(s for s in spans if s.context is not None and s.context == span.parent)


def attributes(span: ReadableSpan) -> dict[str, object]:
    assert span.attributes is not None
    return dict(span.attributes)


async def test_a_call_asked_of_the_client_mid_call_waits_in_one_span_till_it_answers() -> None:
    spans, person = await served_run("legacy")
    [wait] = waits(spans)
    assert attributes(wait) == {
        "gen_ai.tool.name": "erase",
        "agent_gateway.approval.call": "tool 0 b",
        "agent_gateway.approval.decision": "approved",
        "agent_gateway.run_id": attributes(wait)["agent_gateway.run_id"],
    }
    assert wait.start_time is not None
    assert wait.end_time is not None
    assert wait.start_time <= person.asked[0] <= person.answered[0] <= wait.end_time
    assert parent_of(wait, spans).name == "invoke_agent assistant"


async def test_a_call_asked_in_a_round_waits_till_the_round_stops_and_its_retry_decides() -> None:
    spans, person = await served_run("auto")
    asked, decided = waits(spans)
    # The round: the call waits under its agent's span, which the pause ended, not failed.
    assert attributes(asked)["agent_gateway.approval.decision"] == "none"
    round_agent = parent_of(asked, spans)
    assert round_agent.name == "invoke_agent assistant"
    assert round_agent.status.status_code == StatusCode.UNSET
    assert attributes(round_agent)["agent_gateway.paused"] == "waiting for the client's approval"
    assert asked.end_time is not None
    assert round_agent.end_time is not None
    assert asked.end_time <= round_agent.end_time
    assert asked.end_time <= person.asked[0]  # the client is asked once the round ended
    # The retry carrying the answer: the decision, as a resumed `--no-wait` run's.
    assert decided.start_time is not None
    assert person.answered[0] <= decided.start_time
    assert attributes(decided)["agent_gateway.approval.decision"] == "approved"
    assert parent_of(decided, spans).name == "invoke_agent assistant"
    # The same span and attributes as a call asked mid-call (the run's id aside).
    for wait in (asked, decided):
        assert wait.name == "await_approval erase"
        assert attributes(wait)["gen_ai.tool.name"] == "erase"
        assert attributes(wait)["agent_gateway.approval.call"] == "tool 0 b"
