"""Spans written as JSON to stderr (`--otel` with no collector) on a terminal: whole, as log
lines are, never inside a streamed answer's line."""

from __future__ import annotations

import json
import sys
from io import StringIO

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from rich.console import Console

from agent import ScriptedModel
from gateway import AgentSpec, Gateway, TraceEvent
from gateway.console import open_console
from gateway.otel_export import _exporter  # pyright: ignore[reportPrivateUsage]
from tests.screen import ANSI

ANSWER = "The crunch came out at 42, as expected."


def terminal(file: StringIO) -> Console:
    return Console(file=file, force_terminal=True, width=100)


@pytest.mark.anyio
async def test_span_json_waits_for_the_streamed_answer_line_to_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The exporter wrote its batch from its thread straight to stderr, mid-word."""
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    screen, err = StringIO(), StringIO()  # stdout and stderr on one terminal
    monkeypatch.setattr(sys, "stderr", screen)
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter()))
    tokens = 0

    async def span_between_tokens(event: TraceEvent) -> None:
        nonlocal tokens
        if event.phase == "token":
            tokens += 1
            if tokens == 2:
                provider.get_tracer("test").start_span("exported mid-line").end()

    async with open_console(terminal(screen), terminal(err)) as console:
        gateway = Gateway([], [AgentSpec("a", ScriptedModel([ANSWER + "\nSecond line."]))])
        await gateway.run("a", "go", hooks=[console, span_between_tokens], stream=True)
    provider.get_tracer("test").start_span("after the console").end()
    assert tokens > 3
    shown = ANSI.sub("", screen.getvalue())
    first, rest = shown.split("\n", 1)
    assert first == ANSWER  # whole, its span after it
    during, after = rest.split("Second line.\n")
    assert json.loads(during)["name"] == "exported mid-line"
    assert json.loads(after)["name"] == "after the console"  # straight to stderr again
