"""Local Python tools: schemas from signatures, validation, routing, and the calculator."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from agent import Action
from gateway.cli import main
from tests.durable.cli_runs import SCRIPT, cli_env
from toolkits import (
    FunctionToolkit,
    NoSuchTool,
    Tool,
    ToolTimeout,
    calculator,
    function_tool,
    result_text,
)
from toolkits.calculator import CalculatorError, evaluate

pytestmark = pytest.mark.anyio


def routed_action(tool: Tool, arguments: dict[str, JsonValue]) -> Action:
    """The action the agent makes of a call to `tool` (the engine routes it by node and name)."""
    return Action.routed(
        node=tool.source_node,
        tool=tool.name,
        arguments=arguments,
        from_toolkit=tool.is_from_toolkit,
        tool_call_id="call_1",
        item_index=0,
    )


@function_tool
def weather(city: str, days: int = 1, tool: str = "thermometer") -> dict[str, object]:
    """Forecast for a city.

    Second paragraph of the docs.
    """
    return {"city": city, "days": days, "tool": tool, "thread": threading.current_thread().name}


@function_tool(name="add", description="Adds.")
async def add_numbers(a: float, b: float) -> float:
    return a + b


async def test_schema_and_description_come_from_the_signature() -> None:
    assert weather.description.startswith("Forecast for a city.\n\nSecond paragraph")
    schema = weather.input_schema
    assert schema["required"] == ["city"]
    assert schema["properties"]["days"] == {"default": 1, "title": "Days", "type": "integer"}
    assert schema["additionalProperties"] is False
    assert add_numbers.name == "add"
    assert add_numbers.description == "Adds."


async def test_sync_functions_run_off_the_event_loop_and_dicts_stay_structured() -> None:
    result = await weather({"city": "Oslo", "days": "3"})
    assert not result.is_error
    assert result.structured_content is not None
    assert result.structured_content["days"] == 3
    assert result.structured_content["thread"] != threading.current_thread().name


async def test_a_toolkit_takes_plain_functions_as_tools() -> None:
    """`FunctionToolkit("n", [fn])` failed with `'function' object has no attribute 'name'`."""

    async def shout(text: str) -> str:
        """Says it louder."""
        return text.upper()

    node = FunctionToolkit("loud", [shout, add_numbers])
    listed = {tool.name: tool.description for tool in await node.list_tools()}
    assert listed == {"shout": "Says it louder.", "add": "Adds."}
    result = await node.call_tool("shout", {"text": "hi"})
    assert result_text(result) == "HI"


async def test_invalid_arguments_are_an_error_result_naming_the_field() -> None:
    result = await weather({"days": "many"})
    assert result.is_error
    text = result_text(result)
    assert "city: Field required" in text
    assert "days: Input should be a valid integer" in text
    assert (await weather({"city": "x", "color": "red"})).is_error


async def test_a_default_that_is_no_json_leaves_the_parameter_optional_without_a_warning() -> None:
    unset = object()

    def search(query: str, limit: object = unset) -> str:
        return query if limit is unset else f"{query} ({limit})"

    tool = function_tool(search)  # warnings are errors here: building it warns of nothing
    assert tool.input_schema["required"] == ["query"]
    assert "default" not in tool.input_schema["properties"]["limit"]
    assert result_text(await tool({"query": "q"})) == "q"


@pytest.mark.parametrize("blocking", [True, False])
async def test_a_tool_that_calls_sys_exit_fails_as_a_tool_not_as_the_process(
    blocking: bool,
) -> None:
    """argparse and click exit on bad arguments: the model reads that, the run goes on."""
    import argparse

    def count(argv: list[str]) -> int:
        parser = argparse.ArgumentParser(prog="count", exit_on_error=False)
        parser.add_argument("--times", type=int)
        parser.error(f"bad arguments: {argv}")  # exits with 2, as argparse does

    result = await function_tool(count, blocking=blocking)({"argv": ["--times", "many"]})
    assert result.is_error
    assert result_text(result) == "the tool exited (sys.exit(2))"


async def test_one_function_is_a_plain_tool_several_are_a_routed_toolkit() -> None:
    single = await FunctionToolkit("weather", [weather]).list_tools()
    assert [(t.name, t.is_from_toolkit) for t in single] == [("weather", False)]
    # A plain tool keeps an argument that happens to be called "tool".
    plain = routed_action(single[0], {"city": "x", "tool": "barometer"})
    assert plain.input == {"city": "x", "tool": "barometer"}
    assert plain.arguments(from_toolkit=False) == {"city": "x", "tool": "barometer"}
    kit = FunctionToolkit("kit", [weather, add_numbers])
    listed = await kit.list_tools()
    assert all(t.is_from_toolkit and t.source_node == "kit" for t in listed)
    action = routed_action(listed[1], {"a": 1, "b": 2})
    assert (action.node, action.input) == ("kit", {"a": 1, "b": 2, "tool": "add"})
    routed = action.arguments(from_toolkit=True)
    assert routed == {"a": 1, "b": 2}
    result = await kit.call_tool("add", routed)
    assert result.structured_content == {"response": 3.0}
    # A toolkit's tool keeps its own "tool" too: the routing name is put in its place, the
    # model's value kept aside and given back, where the model wrote it.
    own = routed_action(listed[0], {"tool": "barometer", "city": "x"})
    assert own.input == {"tool": "weather", "city": "x"}
    assert list(own.arguments(from_toolkit=True).items()) == [("tool", "barometer"), ("city", "x")]
    assert (await kit.call_tool("weather", own.arguments(from_toolkit=True))).structured_content
    with pytest.raises(NoSuchTool):
        await kit.call_tool("subtract", {})


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 * 25", "425"),
        ("2 ^ 10", "1024"),
        ("(1 + 2) * -3", "-9"),
        ("7 // 2 + 7 % 2", "4"),
        ("sqrt(16) + abs(-1)", "5"),
        ("17 * 25 * 1.08", "459"),
        ("0.1 + 0.2", "0.3"),
        ("round(pi, 2)", "3.14"),
        ("max(1, 5, 3)", "5"),
    ],
)
async def test_calculator_evaluates_arithmetic(expression: str, value: str) -> None:
    result = await calculator({"expression": expression})
    assert result.structured_content == {"response": value}


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("__import__('os').system('true')", "unsupported"),
        ("open('/etc/passwd')", "unsupported"),
        ("(1).__class__", "unsupported"),
        ("9 ** 9 ** 9", "too large"),
        ("10 ** 900 * 10 ** 900", "too large"),
        ("1 / 0", "division by zero"),
        ("(-8) ** 0.5", "not a real number"),
        ("sqrt(-1)", "math domain error"),
        ("True + 1", "booleans"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 2000, "longer than"),
        ("1 + \ud800", "not an arithmetic expression: '1 \\+ \\\\ud800' holds a lone surrogate"),
    ],
)
def test_calculator_refuses_what_is_not_bounded_arithmetic(expression: str, problem: str) -> None:
    with pytest.raises(CalculatorError, match=problem):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        # Computed first and checked after, each held the event loop: 13-26 s for the powers,
        # hours for round (10**(10**9) first), a RecursionError for the minuses.
        ("(2**3000+1)**9999", "would be too large: at least 29,997,001 bits"),
        ("(3**2000)**9999 % 7", "would be too large"),
        ("2**3000 * 2**3000", "would be too large: at least 6,001 bits"),
        ("2**1661 * 2**1661", "would be too large: at least 3,323 bits"),
        ("round(7, -(10**9))", "round: ndigits must be from -1,000 to 1,000"),
        ("round(7, -1001)", "round: ndigits must be from -1,000 to 1,000"),
        ("0x" + "f" * 900 + " + 1", "number is too large"),
        ("-" * 998 + "1", "nested too deeply"),
    ],
)
def test_calculator_refuses_costly_arithmetic_before_computing_it(
    expression: str, problem: str
) -> None:
    with pytest.raises(CalculatorError, match=problem):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "bits"),
    [("2**3321", 3322), ("(-2)**3321", 3322), ("2**1660 * 2**1661", 3322), ("3**2095", 3321)],
)
def test_calculator_computes_results_up_to_its_bound(expression: str, bits: int) -> None:
    value = evaluate(expression)
    assert isinstance(value, int)
    assert value.bit_length() == bits


def test_calculator_rounds_within_its_ndigits_bound() -> None:
    assert evaluate("round(123456, -3)") == 123000
    assert evaluate("round(7, -1000)") == 0
    assert evaluate("round(pi, 1000)") == evaluate("pi")


async def test_the_calculator_tool_refuses_a_costly_power_as_an_error_result() -> None:
    result = await calculator({"expression": "(2**3000+1)**9999"})  # runs on the event loop
    assert result.is_error
    assert "would be too large" in result_text(result)


async def test_the_calculator_tells_a_lone_surrogate_in_words() -> None:
    result = await calculator({"expression": "\ud800"})
    assert result.is_error
    said = result_text(result)
    assert "not an arithmetic expression" in said
    assert "Unicode" not in said  # no Python exception's name or words


async def test_a_local_tool_that_outlives_its_timeout_is_a_timeout_error() -> None:
    released = threading.Event()
    cancelled = anyio.Event()

    @function_tool(timeout=0.2)
    async def hangs() -> str:
        try:
            await anyio.Event().wait()
        finally:
            cancelled.set()
        return "never"

    @function_tool(timeout=0.2)
    def blocks() -> str:
        released.wait(10)
        return "late"

    with anyio.fail_after(5):
        with pytest.raises(ToolTimeout) as stopped:
            await hangs({})
        assert cancelled.is_set()
        assert str(stopped.value) == (
            "local tool 'hangs' timed out (no result within 0.2 s); the call was cancelled"
        )
        with pytest.raises(ToolTimeout) as abandoned:
            await blocks({})
    released.set()
    assert str(abandoned.value) == (
        "local tool 'blocks' timed out (no result within 0.2 s); its thread could not be "
        "stopped and was left to finish alone"
    )
    assert (abandoned.value.node, abandoned.value.tool, abandoned.value.seconds) == (
        "blocks",
        "blocks",
        0.2,
    )


@pytest.mark.integration
def test_a_command_leaves_a_timed_out_tools_thread_and_finishes_a_tools_own(
    tmp_path: Path,
) -> None:
    """`run` printed its answer, then waited for the thread of a call that had timed out, as
    long as the tool ran (README: "left to finish alone"); `chat` after a Ctrl-C the same. A
    thread a tool starts for work of its own is still finished before the process exits."""
    fifo, copied = tmp_path / "fifo", tmp_path / "copied"
    os.mkfifo(fifo)
    calls = [
        {"name": "nap", "arguments": {"seconds": 600}},
        {"name": "hand_over", "arguments": {"fifo": str(fifo), "path": str(copied)}},
    ]
    script = tmp_path / "answers.json"
    script.write_text(json.dumps([{"tool_calls": calls}, {"content": "Handed over."}]))
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.nap]\npython = "tests.sample_tools:sleep_blocking"\ntimeout = 0.5\n'
        '[tools.hand_over]\npython = "tests.sample_tools:hand_over"\n'
        f'[agents.a]\nmodel = "scripted:{script}"\ntools = ["nap", "hand_over"]\n'
    )
    with subprocess.Popen(
        [str(SCRIPT), "run", "go", "--no-store", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=cli_env(),
    ) as process:
        try:
            assert process.stdout is not None
            assert process.stderr is not None
            assert process.stdout.readline() == b"Handed over.\n"
            assert process.poll() is None  # the tool's own thread waits for its line
            fifo.write_text("copied\n")
            code = process.wait(timeout=30)  # not the 600 s of the call that timed out
        finally:
            process.kill()
        err = process.stderr.read().decode()
    assert code == 0, err
    assert copied.read_text() == "copied\n"
    assert "Traceback" not in err


def test_a_configured_timeout_reaches_the_tool_and_the_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.nap]\npython = "tests.sample_tools:sleep_blocking"\ntimeout = 0.5\n')
    code = main(["call", "nap", "--args", '{"seconds": 2}', "--config", str(config)])
    assert code == 1
    assert capsys.readouterr().err.endswith(
        "error: local tool 'nap' timed out (no result within 0.5 s); its thread could not be "
        "stopped and was left to finish alone\n"
    )
    # A run's model is told, and the run goes on.
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "nap", "arguments": {"seconds": 2}}]},
                {"content": "It slept too long."},
            ]
        )
    )
    run = ["run", "nap", "--model", f"scripted:{script}", "--config", str(config), "--json"]
    assert main([*run, "--no-store"]) == 0
    [step] = json.loads(capsys.readouterr().out)["steps"]
    assert "timed out (no result within 0.5 s)" in json.dumps(step["observation"])
    config.write_text('[tools.nap]\npython = "tests.sample_tools:sleep_blocking"\ntimeout = 0\n')
    assert main(["tools", "--config", str(config)]) == 2
    assert "tools.nap.timeout" in capsys.readouterr().err


def test_a_configured_max_output_cuts_what_the_model_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `shout("ab", 30)` is 89 characters: the model reads 20 of them, and how much was cut.
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.shout]\npython = "tests.sample_tools:shout"\nmax_output = 20\n')
    script = tmp_path / "answers.json"
    script.write_text(
        json.dumps(
            [
                {"tool_calls": [{"name": "shout", "arguments": {"text": "ab", "times": 30}}]},
                {"content": "Loud."},
            ]
        )
    )
    run = ["run", "shout", "--model", f"scripted:{script}", "--config", str(config), "--json"]
    assert main([*run, "--no-store"]) == 0
    [step] = json.loads(capsys.readouterr().out)["steps"]
    assert step["observation"] == "AB AB AB AB AB AB AB\n... [truncated 69 of 89 chars]"
    config.write_text('[tools.shout]\npython = "tests.sample_tools:shout"\nmax_output = 0\n')
    assert main(["tools", "--config", str(config)]) == 2
    assert "tools.shout.max_output" in capsys.readouterr().err


async def test_a_node_of_local_tools_caps_what_the_model_reads_at_its_max_output() -> None:
    assert FunctionToolkit("weather", [weather]).max_output == 100_000  # as an MCP server's
    assert FunctionToolkit("weather", [weather], max_output=500).max_output == 500
    with pytest.raises(ValueError, match="max_output must be positive, not 0"):
        FunctionToolkit("weather", [weather], max_output=0)


@pytest.mark.integration
def test_under_python_OO_the_calculator_keeps_its_description_and_a_stripped_tool_is_said(
    tmp_path: Path,
) -> None:
    """-OO strips docstrings: the calculator's description was one, so models were offered it
    with none; a function tool described by its docstring now is, with one warning."""
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[tools.shout]\npython = "tests.sample_tools:shout"\n'
        '[tools.told]\npython = "tests.sample_tools:shout"\ndescription = "Shouts."\n'
    )
    listed = subprocess.run(
        [str(SCRIPT.with_name("python")), "-OO", "-m", "gateway.cli", "tools", "--json"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=cli_env(),
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    described = {tool["name"]: tool["description"] for tool in json.loads(listed.stdout)["tools"]}
    assert described["calculator"].startswith('Evaluate an arithmetic expression, e.g. "17 * 25"')
    assert described["told"] == "Shouts."
    assert described["shout"] == ""
    said = [line for line in listed.stderr.splitlines() if "no description" in line]
    assert len(said) == 1
    assert "tool 'shout' has no description: Python runs with -OO" in said[0]
