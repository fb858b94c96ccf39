"""A run's trace exported as OpenTelemetry spans, following the GenAI semantic conventions."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pydantic import JsonValue

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.otel import OtelExporter
from toolkits import FunctionToolkit, calculator


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
