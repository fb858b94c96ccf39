"""A run's trace exported as OpenTelemetry spans, following the GenAI semantic conventions."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPDeprecationWarning
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import JsonValue

from agent import (
    AgentItem,
    AgentOptions,
    InProcessStore,
    ModelConnectionError,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    SessionMemory,
)
from agent.models import OpenAIModel
from agent.models.openai import OpenAICompatibleModel
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRequest, ApprovalRule, Decision
from gateway.assembly import open_gateway
from gateway.config import GatewaySettings, parse_config
from gateway.otel import OtelExporter
from gateway.otel_batch import BoundedExport
from gateway.server import HttpOptions, build_server, http_app
from gateway.traced_model import note_retry
from tests.models.support import FakeProvider, Sleeps, json_response, retry_policy
from tests.server.processes import SCRIPT, http_server
from tests.server.support import serve
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import FunctionToolkit, calculator
from toolkits.mcp import McpServerConfig, McpToolkit


def call(name: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=name, arguments=arguments)])


def exporter() -> tuple[OtelExporter, InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    return OtelExporter(provider), memory


@pytest.mark.anyio
async def test_a_run_becomes_agent_chat_and_tool_spans_nested_as_in_the_trace() -> None:
    outer = ScriptedModel(
        [call("math", prompt="6 * 7?"), call("nope"), "It is 42."], name="openai:gpt-4.1-mini"
    )
    inner = ScriptedModel([call("calculator", expression="6 * 7"), "42"], name="scripted:math")
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [
            AgentSpec("assistant", outer, tools=["math"]),
            AgentSpec("math", inner, tools=["calculator"]),
        ],
    )
    hook, memory = exporter()
    result = await gateway.run("assistant", "What is 6 * 7?", hooks=[hook])
    assert result.output == "It is 42."

    spans = memory.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans if span.context is not None}

    def parent(span: ReadableSpan) -> str | None:
        return by_id[span.parent.span_id].name if span.parent is not None else None

    tree = sorted((span.name, parent(span)) for span in spans)
    assert tree == sorted(
        [
            ("invoke_agent assistant", None),
            ("chat gpt-4.1-mini", "invoke_agent assistant"),
            ("execute_tool math", "invoke_agent assistant"),
            ("invoke_agent math", "execute_tool math"),
            ("chat math", "invoke_agent math"),
            ("execute_tool calculator", "invoke_agent math"),
            ("chat math", "invoke_agent math"),
            ("chat gpt-4.1-mini", "invoke_agent assistant"),
            ("execute_tool nope", "invoke_agent assistant"),
            ("chat gpt-4.1-mini", "invoke_agent assistant"),
        ]
    )
    assert len({span.context.trace_id for span in spans if span.context is not None}) == 1

    agent = next(s for s in spans if s.name == "invoke_agent assistant")
    assert agent.kind == SpanKind.INTERNAL
    assert agent.attributes is not None
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "assistant"
    assert agent.attributes["agent_gateway.run_id"] == result.run_id

    chat = next(s for s in spans if s.name == "chat gpt-4.1-mini")
    assert chat.kind == SpanKind.CLIENT
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.provider.name"] == "openai"
    assert chat.attributes["gen_ai.request.model"] == "gpt-4.1-mini"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 10  # the scripted model counts words
    assert chat.attributes["gen_ai.usage.output_tokens"] == 1

    tool = next(s for s in spans if s.name == "execute_tool calculator")
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "calculator"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.status.status_code == StatusCode.UNSET

    unknown = next(s for s in spans if s.name == "execute_tool nope")
    assert unknown.status.status_code == StatusCode.ERROR
    assert unknown.status.description is not None
    assert "there is no tool named 'nope'" in unknown.status.description


@pytest.mark.anyio
async def test_a_trace_continues_through_a_gateway_behind_and_stays_one_trace() -> None:
    """A calls B's agent and B's proxied calculator (SEP-414: the context rides in `_meta`)."""
    b_hook, b_spans = exporter()
    inner = ScriptedModel([call("calculator", expression="6 * 7"), "42"], name="scripted:math")
    b = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [AgentSpec("math", inner, tools=["calculator"], description="Does sums.")],
        hooks=[b_hook],
    )
    served, _router = build_server(b, GatewaySettings(expose_tools=True))
    a_hook, a_spans = exporter()
    outer = ScriptedModel(
        [call("b__math", prompt="6 * 7?"), call("b__calculator", expression="1 + 1"), "42."],
        name="scripted:outer",
    )
    async with McpToolkit("b", McpServerConfig(command="in-process"), target=served) as node:
        a = Gateway([node], [AgentSpec("assistant", outer, tools=["b"])], hooks=[a_hook])
        result = await a.run("assistant", "What is 6 * 7?")
    assert result.output == "42."

    theirs, ours = b_spans.get_finished_spans(), a_spans.get_finished_spans()
    assert {s.context.trace_id for s in (*theirs, *ours) if s.context is not None} == {
        next(s for s in ours if s.name == "invoke_agent assistant").context.trace_id  # type: ignore[union-attr]
    }

    def span_id(spans: Sequence[ReadableSpan], name: str) -> int:
        context = next(s for s in spans if s.name == name).context
        assert context is not None
        return context.span_id

    def parent_id(spans: Sequence[ReadableSpan], name: str) -> int | None:
        parent = next(s for s in spans if s.name == name).parent
        return parent.span_id if parent is not None else None

    # B's work hangs under the tool call of A that asked for it.
    assert parent_id(theirs, "invoke_agent math") == span_id(ours, "execute_tool b__math")
    # B's calculator ran twice: for its agent, and proxied for A's own call.
    calculators = [s for s in theirs if s.name == "execute_tool calculator"]
    assert {s.parent.span_id for s in calculators if s.parent is not None} == {
        span_id(theirs, "invoke_agent math"),
        span_id(ours, "execute_tool b__calculator"),
    }


@pytest.mark.anyio
async def test_the_responses_api_is_openai_as_a_provider() -> None:
    model = ScriptedModel(["hi"], name="openai-responses:gpt-5-mini")
    hook, memory = exporter()
    await Gateway([], [AgentSpec("a", model)]).run("a", "hello", hooks=[hook])
    [chat] = [s for s in memory.get_finished_spans() if s.name.startswith("chat")]
    assert chat.name == "chat gpt-5-mini"
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "openai"


@pytest.mark.anyio
@pytest.mark.parametrize(
    "name",
    [
        "openai-responses:http://127.0.0.1:8000/v1#openai/gpt-oss-20b",
        "openai-compatible:http://127.0.0.1:8000/v1#openai/gpt-oss-20b",
    ],
)
async def test_a_server_of_its_own_is_no_openai_whichever_api_it_speaks(name: str) -> None:
    hook, memory = exporter()
    await Gateway([], [AgentSpec("a", ScriptedModel(["hi"], name=name))]).run(
        "a", "hello", hooks=[hook]
    )
    [chat] = [s for s in memory.get_finished_spans() if s.name.startswith("chat")]
    assert chat.name == "chat openai/gpt-oss-20b"
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "openai-compatible"
    assert chat.attributes["gen_ai.request.model"] == "openai/gpt-oss-20b"


@pytest.mark.anyio
async def test_a_fallback_chain_names_each_span_by_the_model_asked(tmp_path: Path) -> None:
    empty, good = tmp_path / "empty.json", tmp_path / "good.json"
    empty.write_text("[]")  # fails at once: it has no answers
    good.write_text(json.dumps([{"content": "hi"}, {"content": "hi again"}]))
    chain = [f"scripted:{empty}", f"scripted:{good}"]
    hook, memory = exporter()
    config = parse_config({"agents": {"a": {"model": chain}}})
    async with open_gateway(config, hooks=[hook]) as gateway:
        assert (await gateway.run("a", "hello")).output == "hi"
    failed, chat = [s for s in memory.get_finished_spans() if s.name.startswith("chat")]
    assert failed.name == "chat empty.json"  # the model that was asked first, not the chain
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes is not None
    assert failed.attributes["error.type"] == "ScriptExhausted"
    assert [e.attributes["fallback_to"] for e in failed.events if e.attributes] == [
        f"scripted:{good.name}"
    ]
    assert chat.name == "chat good.json"  # the model that answered
    assert chat.attributes is not None
    assert chat.attributes["gen_ai.provider.name"] == "scripted"
    assert chat.attributes["gen_ai.request.model"] == "good.json"
    assert chat.status.status_code == StatusCode.UNSET


@pytest.mark.anyio
async def test_a_malformed_traceparent_starts_a_trace_of_its_own() -> None:
    hook, memory = exporter()
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [AgentSpec("math", ScriptedModel(["42"]), tools=["calculator"])],
        hooks=[hook],
    )
    served, _router = build_server(gateway, GatewaySettings())
    async with Client(served) as client:
        meta = {"traceparent": "00-not-a-trace-01"}
        result = await client.call_tool("math", {"prompt": "6 * 7?"}, meta=meta)  # type: ignore[arg-type]
    assert not result.is_error
    spans = memory.get_finished_spans()
    assert next(s for s in spans if s.name == "invoke_agent math").parent is None
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1


@pytest.mark.anyio
async def test_a_tools_own_error_text_stays_out_of_the_span() -> None:
    """It may quote the call (the README: arguments and results are not recorded); the
    gateway's own words (an unknown tool) are kept."""
    model = ScriptedModel(
        [
            call("calculator", expression="my_salary * 2"),
            call("calculator", expr="1"),  # not its schema: refused, the arguments quoted
            call("nope"),
            "done",
        ]
    )
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])], [AgentSpec("a", model, ["calculator"])]
    )
    hook, memory = exporter()
    assert (await gateway.run("a", "go", hooks=[hook])).output == "done"
    failed = [s for s in memory.get_finished_spans() if s.status.status_code == StatusCode.ERROR]
    said = {s.name: s.status.description for s in failed}
    assert [s.name for s in failed] == [
        "execute_tool calculator",
        "execute_tool calculator",
        "execute_tool nope",
    ]
    assert [s.status.description for s in failed[:2]] == [None, None]  # quoted the call
    assert "there is no tool named 'nope'" in (said["execute_tool nope"] or "")
    assert all(
        s.attributes is not None and s.attributes["error.type"] == "tool_error" for s in failed
    )


@pytest.mark.anyio
async def test_a_failing_call_repeated_too_often_keeps_the_tools_words_out_too() -> None:
    """The agent answers the third itself, quoting the earlier result: the tool's words."""
    model = ScriptedModel([call("calculator", expression="my_salary * 2")] * 3 + ["done"])
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])], [AgentSpec("a", model, ["calculator"])]
    )
    hook, memory = exporter()
    assert (await gateway.run("a", "go", hooks=[hook])).output == "done"
    failed = [s for s in memory.get_finished_spans() if s.name == "execute_tool calculator"]
    assert [s.status.status_code for s in failed] == [StatusCode.ERROR] * 3
    assert [s.status.description for s in failed] == [None] * 3
    assert secret_free(failed, "my_salary")


def run_installed(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    executable = shutil.which("agent-gateway", path=str(Path(sys.executable).parent))
    assert executable is not None, "the package is not installed (pip install -e .)"
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
                {"content": "It is 42."},
            ]
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [executable, "run", "6 * 7?", "--model", f"scripted:{script}", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )


@pytest.mark.integration
def test_run_with_otel_exports_the_spans_and_keeps_the_answer_plain(tmp_path: Path) -> None:
    done = run_installed(tmp_path, "--otel")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is 42.\n"  # spans never go to stdout
    names = re.findall(r'"name": "([^"]+)"', done.stderr)
    assert sorted(names) == sorted(
        [
            "invoke_agent assistant",
            "chat answers.json",
            "execute_tool calculator",
            "chat answers.json",
        ]
    )
    assert '"gen_ai.tool.call.id": "call_1"' in done.stderr


@pytest.mark.integration
def test_otel_in_the_config_exports_too_and_is_off_by_default(tmp_path: Path) -> None:
    assert "invoke_agent" not in run_installed(tmp_path).stderr
    (tmp_path / "agent-gateway.toml").write_text(
        '[gateway]\notel = true\n[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.assistant]\ntools = ["calculator"]\n'
    )
    done = run_installed(tmp_path)
    assert done.returncode == 0, done.stderr
    assert '"name": "invoke_agent assistant"' in done.stderr


REPO = Path(__file__).resolve().parents[1]
TWO_GATEWAYS = REPO / "examples" / "two_gateways"


@pytest.mark.anyio
@pytest.mark.integration
async def test_two_gateway_processes_over_http_write_one_trace(tmp_path: Path) -> None:
    """The example's gateway A runs with --otel; B, serving over HTTP, exports its own spans."""
    b_config = tmp_path / "b.toml"
    b_config.write_text(
        (TWO_GATEWAYS / "b.toml").read_text().replace("scripted:", f"scripted:{TWO_GATEWAYS}/")
        + "\n[gateway]\notel = true\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    # B's spans go out in batches: in 50 ms, not at its exit (after this test reads them).
    async with http_server(b_config, env={**env, "OTEL_BSP_SCHEDULE_DELAY": "50"}) as b:
        a_config = tmp_path / "a.toml"
        a_config.write_text(
            f'[mcpServers.b]\nurl = "{b.url}"\n[agents.assistant]\n'
            f'model = "scripted:{TWO_GATEWAYS}/assistant.json"\ntools = ["b"]\n'
        )
        with anyio.fail_after(30):
            done = await anyio.run_process(
                [str(SCRIPT), "run", "shirts?", "--config", str(a_config), "--otel", "--no-store"],
                env=env,
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
            call = (
                "tools/call math",
                "invoke_agent math",
                "chat math.json",
                "execute_tool calculator",
            )
            while True:  # until B's spans are out (the request's, which ends last, too)
                more = b.more_stderr
                theirs = exported_spans("\n".join(b.stderr))
                if all(name in theirs for name in call):
                    break
                assert not b.stderr_closed.is_set(), f"B ended before its spans: {b.stderr}"
                await more.wait()
    ours = exported_spans(done.stderr.decode())
    trace_id = ours["invoke_agent assistant"]["context"]["trace_id"]
    assert {theirs[name]["context"]["trace_id"] for name in call} == {trace_id}
    # B's work hangs under its SDK's span of the request, and that under A's call of it.
    assert (
        theirs["invoke_agent math"]["parent_id"] == theirs["tools/call math"]["context"]["span_id"]
    )
    assert (
        theirs["tools/call math"]["parent_id"] == ours["execute_tool b__math"]["context"]["span_id"]
    )


def exported_spans(text: str) -> dict[str, Any]:
    """The spans `ConsoleSpanExporter` wrote in `text` (JSON objects among other lines), by
    name (the last of a name)."""
    decoder, spans = json.JSONDecoder(), dict[str, Any]()
    for start in (m.start() for m in re.finditer(r"^\{", text, re.M)):
        span, _end = decoder.raw_decode(text, start)
        spans[span["name"]] = span
    return spans


class StuckExporter(SpanExporter):
    """A collector that never answers (until the test lets it)."""

    def __init__(self) -> None:
        self.released = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.released.wait()
        return SpanExportResult.FAILURE


class FailingExporter(SpanExporter):
    """A collector that is down: the OTLP exporter's retries, logged as it logs them."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        said = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        for wait in (1, 2, 4):
            said.warning("Transient error %s encountered, retrying in %ss.", "refused", wait)
        said.error("Failed to export span batch code: %s", 503)
        return SpanExportResult.FAILURE


def ended_spans(export: BoundedExport, count: int) -> None:
    tracer = export.provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span {number}").end()


@pytest.fixture
def exporter_logs_kept() -> Iterator[None]:
    """An export abandoned at the end keeps its exporter's logs quiet for the rest of the
    process (it may still retry): here, only for the test."""
    logger = logging.getLogger("opentelemetry.exporter")
    handlers, propagate = list(logger.handlers), logger.propagate
    yield
    logger.handlers, logger.propagate = handlers, propagate


@pytest.mark.usefixtures("exporter_logs_kept")
def test_exporting_at_the_end_waits_a_bounded_time_then_says_once_what_it_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stuck = StuckExporter()
    export = BoundedExport(stuck)
    ended_spans(export, 3)
    try:
        started = time.monotonic()
        export.close(within=0.2)
        assert time.monotonic() - started < 5  # the SDK's own shutdown waits 30 s
    finally:
        stuck.released.set()
    assert [r.getMessage() for r in caplog.records] == [
        "OpenTelemetry: 3 spans not exported: the exporter did not finish within 0.2 s "
        "(is the collector down?)"
    ]


def test_an_exporter_that_fails_is_one_warning_with_its_reason_not_one_per_retry(
    caplog: pytest.LogCaptureFixture,
) -> None:
    export = BoundedExport(FailingExporter())
    ended_spans(export, 2)
    export.close()
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "OpenTelemetry: 2 spans not exported: the exporter failed: "
            "Failed to export span batch code: 503",
        )
    ]
    assert logging.getLogger("opentelemetry.exporter").propagate  # as it was, after


def test_batches_that_fail_during_the_run_say_nothing_till_the_one_warning_at_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A long run exports a batch every few seconds: a collector that is down had a warning
    for each, between the lines of the answer."""
    export = BoundedExport(FailingExporter())
    ended_spans(export, 2)
    assert export.provider.force_flush()  # a batch goes out (and fails) as the run goes on
    ended_spans(export, 1)
    assert export.provider.force_flush()
    assert caplog.records == []
    export.close()
    assert [r.getMessage() for r in caplog.records] == [
        "OpenTelemetry: 3 spans not exported: the exporter failed: "
        "Failed to export span batch code: 503"
    ]


class QuotingExporter(SpanExporter):
    """A collector that is down, whose URL the exporter's words quote (as urllib3's do)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        said = logging.getLogger("opentelemetry.exporter.otlp.proto.http.trace_exporter")
        said.warning(
            "Transient error HTTPConnectionPool(host='127.0.0.1', port=9): Max retries "
            "exceeded with url: /v1/traces?api_key=OTLPSEKRET (Caused by NewConnectionError)"
        )
        return SpanExportResult.FAILURE


def test_the_collector_urls_credentials_are_masked_in_the_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    export = BoundedExport(QuotingExporter(), "http://127.0.0.1:9/v1/traces?api_key=OTLPSEKRET")
    ended_spans(export, 1)
    export.close()
    [warning] = [r.getMessage() for r in caplog.records]
    assert "OTLPSEKRET" not in warning
    assert "with url: /v1/traces?api_key=*** (Caused" in warning


def test_spans_all_exported_at_the_end_say_nothing(caplog: pytest.LogCaptureFixture) -> None:
    memory = InMemorySpanExporter()
    export = BoundedExport(memory)
    ended_spans(export, 2)
    export.close()
    assert len(memory.get_finished_spans()) == 2
    assert caplog.records == []


@pytest.mark.anyio
@pytest.mark.integration
async def test_the_answer_is_printed_before_the_spans_are_exported(tmp_path: Path) -> None:
    """The exporter waits on a pipe the test writes to once it has read the answer: printed
    only at the end, after the export (as it was), the answer never comes."""
    fifo = tmp_path / "collector"
    os.mkfifo(fifo)
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"content": "It is 42."}]))
    program = f"""
import sys
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
import gateway.otel_export
from gateway.cli import main

class Collector(SpanExporter):
    def export(self, spans):
        with open({str(fifo)!r}) as pipe:  # blocks until the test opens the other end
            pipe.read()
        return SpanExportResult.SUCCESS

gateway.otel_export._exporter = Collector
sys.exit(main(["run", "6 * 7?", "--model", "scripted:{script}", "--no-store", "--otel"]))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with anyio.fail_after(30):
        async with await anyio.open_process(
            [sys.executable, "-c", program], env={**env, "PYTHONPATH": str(REPO)}, cwd=tmp_path
        ) as process:
            assert process.stdout is not None
            out = b""
            while b"\n" not in out:
                out += await process.stdout.receive()
            assert out == b"It is 42.\n"

            def collect() -> None:
                with open(fifo, "w") as pipe:
                    pipe.write("ok")

            await anyio.to_thread.run_sync(collect)
            assert await process.wait() == 0
            assert process.stderr is not None
            err = b"".join([chunk async for chunk in process.stderr])
    assert b"not exported" not in err, err


@pytest.mark.anyio
async def test_a_servers_progress_messages_and_log_data_stay_out_of_the_spans() -> None:
    """A server may say what it was called with as it works (a gateway behind this one does:
    `tool calculator: running in={...}`): the span tells how far it got and how much each
    logger said, once per step, not the words."""
    toy = ToyServer("crm")

    async def lookup(ctx: Context, args: dict[str, Any]) -> mcp_types.CallToolResult:
        for step in (1, 2):
            await ctx.session.report_progress(step, 2, f"looking up {args['customer']}")
            with warnings.catch_warnings():  # logging is deprecated at 2026-07-28
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.session.send_log_message(  # pyright: ignore[reportDeprecated]
                    "info", f"lookup in={args['customer']}", "crm", ctx.request_id
                )
        return text_result(f"{args['customer']}: gold")

    toy.add("lookup", lookup)
    model = ScriptedModel([call("crm__lookup", customer="Ada Lovelace"), "Gold."])
    hook, memory = exporter()
    node = McpToolkit("crm", McpServerConfig(command="in-process"), target=toy.server)
    async with node:
        gateway = Gateway([node], [AgentSpec("a", model, ["crm"])], hooks=[hook])
        assert (await gateway.run("a", "Ada's tier?")).output == "Gold."
    spans = memory.get_finished_spans()
    recorded = json.dumps(
        [
            [dict(s.attributes or {}) for s in spans],
            [[e.name, dict(e.attributes or {})] for s in spans for e in s.events],
        ]
    )
    assert "Ada" not in recorded
    [tool] = [s for s in spans if s.name == "execute_tool crm__lookup"]
    assert [(e.name, dict(e.attributes or {})) for e in tool.events] == [
        ("tool.progress", {"progress": 1.0, "total": 2.0}),
        ("tool.progress", {"progress": 2.0, "total": 2.0}),
        ("tool.server_log", {"level": "info", "count": 2, "logger": "crm"}),
    ]


def test_spans_name_the_service_agent_gateway_unless_the_environment_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for variable in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"):
        monkeypatch.delenv(variable, raising=False)
    named: list[object] = []
    for environment in (
        {},
        {"OTEL_SERVICE_NAME": "billing"},
        {"OTEL_RESOURCE_ATTRIBUTES": "service.name=crm,team=ops"},
    ):
        with monkeypatch.context() as patched:
            for variable, value in environment.items():
                patched.setenv(variable, value)
            memory = InMemorySpanExporter()
            export = BoundedExport(memory)
            ended_spans(export, 1)
            export.close()
        [span] = memory.get_finished_spans()
        named.append(span.resource.attributes["service.name"])
    assert named == ["agent-gateway", "billing", "crm"]


def openai_model(*answers: httpx.Response | Exception) -> OpenAIModel:
    provider = FakeProvider(*answers)
    return OpenAIModel(
        "gpt-4.1-mini",
        api_key="sk-test",
        http_client=provider.client(),
        retry=retry_policy(Sleeps()),  # retried without waiting
    )


COMPLETION = {
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
}


@pytest.mark.anyio
async def test_a_chat_span_says_why_the_model_stopped_and_a_failure_its_error_class() -> None:
    answered = openai_model(json_response(200, COMPLETION))
    down = openai_model(*[httpx.ConnectError("connection refused")] * 4)
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", answered), AgentSpec("b", down)], hooks=[hook])
    assert (await gateway.run("a", "6 * 7?")).output == "It is 42."
    with pytest.raises(ModelConnectionError):
        await gateway.run("b", "6 * 7?")
    ok, failed = (s for s in memory.get_finished_spans() if s.name == "chat gpt-4.1-mini")
    assert ok.attributes is not None
    assert failed.attributes is not None
    assert ok.attributes["gen_ai.response.finish_reasons"] == ("stop",)
    assert failed.status.status_code == StatusCode.ERROR
    assert failed.attributes["error.type"] == "ModelConnectionError"
    assert "gen_ai.response.finish_reasons" not in failed.attributes


QUOTING = {
    "error": {
        "message": "Invalid 'messages[1].content': the text 'my diary PRIV-777' is not allowed",
        "type": "invalid_request_error",
        "param": "messages[1].content",
        "code": None,
    }
}
"""OpenAI's 400 that quotes the request."""


def secret_free(spans: Sequence[ReadableSpan], secret: str) -> bool:
    """Whether `secret` is nowhere in the spans: names, statuses, attributes, events."""
    for span in spans:
        said = [span.name, span.status.description or "", str(dict(span.attributes or {}))]
        said += [f"{event.name} {dict(event.attributes or {})}" for event in span.events]
        if any(secret in text for text in said):
            return False
    return True


@pytest.mark.anyio
async def test_a_providers_words_stay_out_of_a_failed_call_and_its_retries() -> None:
    """Its explanation may quote the prompt: the span says which model and the HTTP status;
    a retry's note says the status, when and which attempt."""
    provider = FakeProvider(
        json_response(500, {"error": {"message": "upstream choked on PRIV-777"}}),
        json_response(400, QUOTING),
    )
    retry = retry_policy(Sleeps(), on_retry=note_retry)  # as model specs make theirs
    refused = OpenAIModel("gpt-4.1-mini", api_key="sk", http_client=provider.client(), retry=retry)
    hook, memory = exporter()
    gateway = Gateway([], [AgentSpec("a", refused)], hooks=[hook])
    result = await gateway.run("a", "my diary PRIV-777")
    assert "PRIV-777" in (result.items[0].error or "")  # the run's own result keeps them
    spans = memory.get_finished_spans()
    assert secret_free(spans, "PRIV-777")
    [chat] = [s for s in spans if s.name == "chat gpt-4.1-mini"]
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.status.description == (
        "openai:gpt-4.1-mini: HTTP 400: (the provider's words left out)"
    )
    [retry] = [e.attributes for e in chat.events if e.name == "model.note"]
    assert retry is not None
    assert str(retry["retry"]).startswith("HTTP 500. Retrying in "), retry


@pytest.mark.anyio
async def test_a_run_whose_every_item_failed_has_a_failed_agent_span() -> None:
    """Its agent ended as planned, but the run failed: the span says so, and why."""
    refused = openai_model(json_response(400, QUOTING))
    looping = ScriptedModel([call("calculator", expression="1")] * 3)
    answered = ScriptedModel(["fine"])
    hook, memory = exporter()
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [
            AgentSpec("refused", refused),
            AgentSpec("looping", looping, ["calculator"], options=AgentOptions(max_iterations=2)),
            AgentSpec("answered", answered),
        ],
        hooks=[hook],
    )
    for agent in ("refused", "looping", "answered"):
        await gateway.run(agent, "my diary PRIV-777")
    spans = {s.name: s for s in memory.get_finished_spans() if s.name.startswith("invoke_agent")}
    refusing, loop, fine = (spans[f"invoke_agent {n}"] for n in ("refused", "looping", "answered"))
    assert refusing.status.status_code == StatusCode.ERROR
    assert refusing.attributes is not None
    assert refusing.attributes["error.type"] == "ModelHTTPError"
    assert refusing.status.description == (
        "openai:gpt-4.1-mini: HTTP 400: (the provider's words left out)"
    )
    assert loop.status.status_code == StatusCode.ERROR
    assert loop.attributes is not None
    assert loop.attributes["error.type"] == "MaxIterations"
    assert (loop.status.description or "").startswith("Max iterations (2) reached.")
    assert fine.status.status_code == StatusCode.UNSET
    assert fine.attributes is not None
    assert "error.type" not in fine.attributes


class Person:
    """Approves a call when the test says so."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.decided = anyio.Event()

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.set()
        await self.decided.wait()
        return Decision(approved=True)


@pytest.mark.anyio
async def test_a_wait_for_approval_is_a_span_of_its_own_ending_with_the_decision() -> None:
    model = ScriptedModel([call("calculator", expression="6 * 7"), "42"])
    spec = AgentSpec("a", model, ["calculator"], approval=ApprovalRule(["calculator"]))
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    hook, memory = exporter()
    person = Person()
    with anyio.fail_after(20):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(lambda: gateway.run("a", "go", hooks=[hook], approver=person))
            await person.asked.wait()
            waiting = [s.name for s in memory.get_finished_spans()]
            assert "await_approval calculator" not in waiting  # it lasts as long as the wait
            person.decided.set()
    spans = {s.name: s for s in memory.get_finished_spans()}
    wait = spans["await_approval calculator"]
    assert wait.attributes is not None
    assert wait.attributes["agent_gateway.approval.decision"] == "approved"
    assert wait.attributes["gen_ai.tool.name"] == "calculator"
    assert wait.parent is not None
    assert spans["invoke_agent a"].context is not None
    assert wait.parent.span_id == spans["invoke_agent a"].context.span_id
    assert wait.end_time is not None
    assert spans["execute_tool calculator"].start_time is not None
    assert wait.end_time <= spans["execute_tool calculator"].start_time  # then the call ran


@pytest.mark.anyio
async def test_a_handoff_is_an_event_and_an_attribute_of_the_leads_agent_span() -> None:
    lead = ScriptedModel([call("billing")], name="scripted:lead")
    billing = ScriptedModel(["Refunded."], name="scripted:billing")
    specs = [AgentSpec("triage", lead, handoffs=["billing"]), AgentSpec("billing", billing)]
    hook, memory = exporter()
    result = await Gateway([], specs).run("triage", "Charged twice?", hooks=[hook])
    assert result.items[0].handoff == "billing"

    spans = {s.name: s for s in memory.get_finished_spans()}
    lead_span = spans["invoke_agent triage"]
    assert lead_span.attributes is not None
    assert lead_span.attributes["agent_gateway.handoff"] == ("billing",)
    handoffs = [e for e in lead_span.events if e.name == "agent.handoff"]
    assert [dict(e.attributes or {}) for e in handoffs] == [{"to": "billing", "item": 0}]
    # The specialist's own span says nothing of handing off: it answered.
    billing_span = spans["invoke_agent billing"]
    assert "agent_gateway.handoff" not in (billing_span.attributes or {})
    assert not [e for e in billing_span.events if e.name == "agent.handoff"]


@pytest.mark.anyio
async def test_items_handed_to_two_agents_are_two_events_and_both_in_the_attribute() -> None:
    lead = ScriptedModel([call("billing"), call("refunds")])
    specs = [
        AgentSpec("triage", lead, handoffs=["billing", "refunds"]),
        AgentSpec("billing", ScriptedModel(["Billed."])),
        AgentSpec("refunds", ScriptedModel(["Refunded."])),
    ]
    hook, memory = exporter()
    items = [AgentItem(prompt="Charged twice?"), AgentItem(prompt="Money back?")]
    result = await Gateway([], specs).run("triage", items, hooks=[hook])
    assert [item.handoff for item in result.items] == ["billing", "refunds"]

    spans = {s.name: s for s in memory.get_finished_spans()}
    lead_span = spans["invoke_agent triage"]
    assert (lead_span.attributes or {})["agent_gateway.handoff"] == ("billing", "refunds")
    handoffs = [dict(e.attributes or {}) for e in lead_span.events if e.name == "agent.handoff"]
    assert handoffs == [{"to": "billing", "item": 0}, {"to": "refunds", "item": 1}]


def _exported(stderr: str) -> dict[str, dict[str, Any]]:
    """The spans the console exporter wrote, by name (one JSON object a span)."""
    blocks = re.findall(r"^\{$.*?^\}$", stderr, flags=re.MULTILINE | re.DOTALL)
    return {span["name"]: span for span in map(json.loads, blocks)}


@pytest.mark.integration
def test_a_run_left_waiting_for_approval_by_no_wait_is_paused_not_failed(tmp_path: Path) -> None:
    executable = Path(sys.executable).parent / "agent-gateway"
    ask = {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]}
    (tmp_path / "answers.json").write_text(json.dumps([ask]))
    (tmp_path / "agent-gateway.toml").write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n[agents.assistant]\n'
        'model = "scripted:answers.json"\ntools = ["calculator"]\n'
        'require_approval = ["calculator"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["PYTHONPATH"] = str(REPO)
    store = ["--state-dir", str(tmp_path / "state"), "--otel", "--no-wait"]
    run_id = None
    for command in (["run", "6 * 7?"], ["resume"]):  # the resumed run waits again
        args = [*command, run_id] if run_id is not None else command
        done = subprocess.run(
            [str(executable), *args, *store, "--json"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=env,
        )
        assert done.returncode == 3, done.stderr
        run_id = json.loads(done.stdout)["run_id"]
        spans = _exported(done.stderr)
        agent = spans["invoke_agent assistant"]
        assert agent["status"]["status_code"] == "UNSET", agent
        assert agent["attributes"]["agent_gateway.paused"] == "waiting for a person's approval"
        assert "error.type" not in agent["attributes"]
        wait = spans["await_approval calculator"]["attributes"]
        assert wait["agent_gateway.approval.decision"] == "none"  # stopped waiting


@pytest.mark.anyio
@pytest.mark.integration
async def test_a_gateway_as_another_gateways_model_over_v1_makes_one_trace() -> None:
    """Gateway A's model is B's `/v1`: A's model request sends its `chat` span's context, as
    its tool calls do over MCP, and B's run continues it; a client's own traceparent too."""
    hook, memory = exporter()
    behind = Gateway([], [AgentSpec("helper", ScriptedModel(["from B"] * 2))], hooks=[hook])
    app = http_app(serve(behind), HttpOptions("127.0.0.1", 0))
    with anyio.fail_after(30):
        async with serve_on_loopback(app) as base, httpx.AsyncClient() as http:
            model = OpenAICompatibleModel(f"{base}/v1", "helper", http_client=http)
            front = Gateway([], [AgentSpec("front", model)], hooks=[hook])
            assert (await front.run("front", "hi")).output == "from B"
            sent = f"00-{'2' * 32}-00f067aa0ba902b7-01"
            body = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}
            answered = await http.post(
                f"{base}/v1/chat/completions", json=body, headers={"traceparent": sent}
            )
    assert answered.status_code == 200, answered.text
    spans = memory.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans if s.context is not None}
    front_chat = next(s for s in spans if s.name == "chat helper")
    first, second = (s for s in spans if s.name == "invoke_agent helper")
    assert first.parent is not None
    assert by_id[first.parent.span_id] is front_chat
    assert len({s.context.trace_id for s in (first, front_chat) if s.context}) == 1
    assert second.context is not None
    assert second.parent is not None
    assert (second.context.trace_id, second.parent.span_id) == (int("2" * 32, 16), 0xF067AA0BA902B7)


@pytest.mark.anyio
async def test_agent_spans_name_their_provider_and_conversation_and_tools_their_type() -> None:
    """The GenAI agent spans: `gen_ai.provider.name` (required on `invoke_agent`), the
    session a turn continues as `gen_ai.conversation.id`, and `gen_ai.tool.type`."""
    model = ScriptedModel(
        [call("calculator", expression="6 * 7"), "42", "again 42"], name="openai:gpt-4.1-mini"
    )
    gateway = Gateway(
        [FunctionToolkit("calculator", [calculator])],
        [AgentSpec("a", model, ["calculator"])],
        memory=SessionMemory(InProcessStore()),
    )
    hook, memory = exporter()
    await gateway.run("a", "6 * 7?", session_id="s-1", hooks=[hook])
    await gateway.run("a", "and again?", hooks=[hook])
    turn, unsaved = (s for s in memory.get_finished_spans() if s.name == "invoke_agent a")
    assert turn.attributes is not None
    assert unsaved.attributes is not None
    assert turn.attributes["gen_ai.provider.name"] == "openai"
    assert turn.attributes["gen_ai.conversation.id"] == "s-1"
    assert "gen_ai.conversation.id" not in unsaved.attributes
    [tool] = [s for s in memory.get_finished_spans() if s.name == "execute_tool calculator"]
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.type"] == "function"
