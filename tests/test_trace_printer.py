"""The human-readable trace: one line per finished span, indented by nesting, for as long as
the process lives (`serve --trace` keeps one printer for the server's life)."""

from __future__ import annotations

import io

import pytest

from agent import AgentOptions, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway, TracePrinter
from toolkits import FunctionToolkit, calculator

pytestmark = pytest.mark.anyio


async def test_lines_are_indented_by_nesting_run_after_run_and_nothing_is_kept_of_ended_spans() -> (
    None
):
    runs = 50
    script = [
        ScriptedAnswer(
            tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "6*7"})]
        ),
        ScriptedAnswer(content="42"),
    ] * runs
    spec = AgentSpec(
        name="assistant",
        model=ScriptedModel(script),
        tools=["calculator"],
        options=AgentOptions(max_iterations=3),
    )
    gateway = Gateway([FunctionToolkit("calculator", [calculator])], [spec])
    out = io.StringIO()
    printer = TracePrinter(out)
    for _ in range(runs):
        await gateway.run("assistant", "6 * 7?", hooks=[printer])

    lines = [line.split("] ", 1)[1] for line in out.getvalue().splitlines()]
    one_run = [
        "    model scripted",
        "    calculator",
        "    model scripted",
        "  agent assistant",
        "run assistant",
    ]
    assert len(lines) == runs * len(one_run)
    for i, line in enumerate(lines):
        assert line.startswith(one_run[i % len(one_run)]), (i, line)
    # An ended span's depth is needed no more: kept, a long-lived printer grows per span.
    assert printer._depth == {}  # pyright: ignore[reportPrivateUsage]
