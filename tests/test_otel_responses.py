"""A chat span names the response, the model that answered and the server it came from
(GenAI semantic conventions: `gen_ai.response.id`, `gen_ai.response.model`, `server.*`)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import JsonValue

from agent import AllModelsFailed, ModelConnectionError, UserMessage
from agent.models import FallbackModel, OpenAICompatibleModel, OpenAIModel
from gateway import AgentSpec, Gateway
from gateway.journal import RecordedModel, ScopedJournal
from gateway.otel import OtelExporter
from gateway.trace import Tracer
from gateway.traced_model import TracedModel, note_fallback
from tests.models.support import FakeProvider, Sleeps, json_response, retry_policy

pytestmark = pytest.mark.anyio

COMPLETION: dict[str, Any] = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion",
    "created": 1741569952,
    "model": "gpt-4.1-mini-2025-04-14",
    "choices": [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "It is 42.", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ],
    "usage": {"prompt_tokens": 19, "completion_tokens": 5, "total_tokens": 24},
    "service_tier": "default",
    "system_fingerprint": "fp_38343a2f8f",
}
OLLAMA_COMPLETION = {
    **COMPLETION,
    "id": "chatcmpl-297",
    "model": "qwen2.5:7b",
    "system_fingerprint": "fp_ollama",
}
DOWN = [httpx.ConnectError("connection refused")] * 4


def exporter() -> tuple[OtelExporter, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return OtelExporter(provider), memory


def openai_model(
    *answers: httpx.Response | Exception, base_url: str = "https://api.openai.com/v1"
) -> OpenAIModel:
    return OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url=base_url,
        http_client=FakeProvider(*answers).client(),
        retry=retry_policy(Sleeps()),  # retried without waiting
    )


def attributes(span: ReadableSpan) -> dict[str, Any]:
    assert span.attributes is not None
    return dict(span.attributes)


async def test_a_chat_span_names_the_response_the_model_that_answered_and_its_server() -> None:
    # A gateway in front of OpenAI, reached with credentials, a path and a query.
    behind_a_proxy = "https://bob:s3cret@llm-gw.example.com:8443/openai/v1?api-version=2024-10-21"
    answered = openai_model(json_response(200, COMPLETION), base_url=behind_a_proxy)
    down = openai_model(*DOWN)
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", answered), AgentSpec("b", down)], hooks=[hook])
    assert (await gateway.run("a", "6 * 7?")).output == "It is 42."
    with pytest.raises(ModelConnectionError):
        await gateway.run("b", "6 * 7?")

    ok, failed = (attributes(s) for s in memory.get_finished_spans() if s.name.startswith("chat"))
    assert ok["gen_ai.request.model"] == "gpt-4.1-mini"
    assert ok["gen_ai.response.model"] == "gpt-4.1-mini-2025-04-14"
    assert ok["gen_ai.response.id"] == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"
    assert (ok["server.address"], ok["server.port"]) == ("llm-gw.example.com", 8443)
    said = json.dumps(ok)
    for private in ("s3cret", "bob", "/openai", "api-version"):
        assert private not in said
    # A failed call says where it went, and names no response.
    assert (failed["server.address"], failed["server.port"]) == ("api.openai.com", 443)
    assert "gen_ai.response.id" not in failed
    assert "gen_ai.response.model" not in failed


async def test_a_cancelled_chat_span_says_where_the_call_went_as_a_failed_one_does() -> None:
    sent = anyio.Event()

    async def hang(request: httpx.Request) -> httpx.Response:
        sent.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    model = OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url="https://llm-gw.example.com:8443/v1",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(hang)),
    )
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", model)], hooks=[hook])
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(gateway.run, "a", "6 * 7?")
            await sent.wait()
            tg.cancel_scope.cancel()

    [span] = [s for s in memory.get_finished_spans() if s.name.startswith("chat")]
    assert span.status.status_code == StatusCode.ERROR
    chat = attributes(span)
    assert chat["error.type"] == "cancelled"
    assert (chat["server.address"], chat["server.port"]) == ("llm-gw.example.com", 8443)


def local_model(*answers: httpx.Response | Exception) -> tuple[OpenAICompatibleModel, FakeProvider]:
    provider = FakeProvider(*answers)
    model = OpenAICompatibleModel(
        "http://127.0.0.1:11434/v1",
        "qwen2.5",
        http_client=provider.client(),
        retry=retry_policy(Sleeps()),
    )
    return model, provider


def span_id_in(request: httpx.Request) -> int:
    """The parent span id of the W3C `traceparent` a request was sent with."""
    return int(request.headers["traceparent"].split("-")[2], 16)


async def test_each_model_of_a_fallback_list_asked_is_a_chat_span_of_its_own() -> None:
    openai = FakeProvider(*DOWN)
    down = OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        base_url="https://llm-gw.example.com:8443/v1",
        http_client=openai.client(),
        retry=retry_policy(Sleeps()),
    )
    local, ollama = local_model(json_response(200, OLLAMA_COMPLETION))
    chain = FallbackModel([down, local], on_fallback=note_fallback)
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", chain)], hooks=[hook])
    assert (await gateway.run("a", "6 * 7?")).output == "It is 42."

    spans = memory.get_finished_spans()
    [agent] = [s for s in spans if s.name.startswith("invoke_agent")]
    failed, answered = sorted(
        (s for s in spans if s.name.startswith("chat")), key=lambda s: s.start_time or 0
    )
    assert failed.name == "chat gpt-4.1-mini"
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.status.description is not None
    assert "cannot reach" in failed.status.description
    tried = attributes(failed)
    assert tried["gen_ai.operation.name"] == "chat"
    assert tried["gen_ai.provider.name"] == "openai"
    assert tried["gen_ai.request.model"] == "gpt-4.1-mini"
    assert tried["error.type"] == "ModelConnectionError"
    assert (tried["server.address"], tried["server.port"]) == ("llm-gw.example.com", 8443)
    assert "gen_ai.response.id" not in tried
    # The fallback's note is its event, not the answering span's.
    [note] = failed.events
    assert note.attributes is not None
    assert note.attributes["fallback_to"] == local.name
    assert answered.events == ()

    assert answered.name == "chat qwen2.5"
    assert answered.status.status_code == StatusCode.UNSET
    chat = attributes(answered)
    assert chat["gen_ai.response.model"] == "qwen2.5:7b"
    assert chat["gen_ai.response.id"] == "chatcmpl-297"
    assert (chat["server.address"], chat["server.port"]) == ("127.0.0.1", 11434)
    assert chat["gen_ai.provider.name"] == "openai-compatible"
    # The agent's provider is the answering model's, not the chain's first.
    assert attributes(agent)["gen_ai.provider.name"] == "openai-compatible"

    # Siblings under the agent, one after the other; each provider was sent its own span.
    assert agent.context is not None
    assert failed.context is not None
    assert answered.context is not None
    assert failed.parent is not None
    assert answered.parent is not None
    assert failed.parent.span_id == answered.parent.span_id == agent.context.span_id
    assert failed.end_time is not None
    assert answered.start_time is not None
    assert failed.end_time <= answered.start_time
    assert {span_id_in(r) for r in openai.requests} == {failed.context.span_id}
    assert [span_id_in(r) for r in ollama.requests] == [answered.context.span_id]


async def test_a_fallback_list_whose_every_model_failed_has_a_failed_span_for_each() -> None:
    local, _ollama = local_model(*DOWN)
    chain = FallbackModel([openai_model(*DOWN), local], on_fallback=note_fallback)
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", chain)], hooks=[hook])
    with pytest.raises(AllModelsFailed):
        await gateway.run("a", "6 * 7?")

    first, last = sorted(
        (s for s in memory.get_finished_spans() if s.name.startswith("chat")),
        key=lambda s: s.start_time or 0,
    )
    assert (first.name, last.name) == ("chat gpt-4.1-mini", "chat qwen2.5")
    assert [s.status.status_code for s in (first, last)] == [StatusCode.ERROR] * 2
    assert attributes(first)["error.type"] == "ModelConnectionError"
    assert attributes(first)["server.address"] == "api.openai.com"
    # The last one ended the call: its error is the list's, and it says where it went.
    assert attributes(last)["error.type"] == "AllModelsFailed"
    assert (attributes(last)["server.address"], attributes(last)["server.port"]) == (
        "127.0.0.1",
        11434,
    )


class Journal:
    """Records each call's result by name, as a stored run's journal does."""

    def __init__(self) -> None:
        self.records: dict[str, JsonValue] = {}

    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        del nested
        if name not in self.records:
            self.records[name] = await call()
        return self.records[name]


async def test_a_recorded_call_keeps_its_response_in_the_span_and_out_of_the_record() -> None:
    journal = Journal()
    hook, memory = exporter()
    ask = [UserMessage(content="6 * 7?")]

    async def traced_call(model: OpenAIModel) -> None:
        recorded = RecordedModel(model, ScopedJournal(journal))
        await TracedModel(recorded, Tracer("run-1", [hook]), None).invoke(ask, [])

    await traced_call(openai_model(json_response(200, COMPLETION)))
    await traced_call(openai_model())  # resumed: answered from the record, nothing sent

    made, replayed = (attributes(s) for s in memory.get_finished_spans())
    assert made["gen_ai.response.id"] == "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT"
    assert made["gen_ai.response.model"] == "gpt-4.1-mini-2025-04-14"
    # The record is the message as a run stores it, which an older gateway still reads.
    assert "chatcmpl" not in json.dumps(journal.records)
    assert "gen_ai.response.id" not in replayed
    assert replayed["server.address"] == "api.openai.com"  # which wrote the recorded answer
