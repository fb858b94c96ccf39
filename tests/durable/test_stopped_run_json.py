"""`run --json` of a stored run stopped by a signal says what the run did so far as the store
has it (`runs show` shows the same): the calls of the step in progress that ended are among
its `steps`, though only their records hold them (no checkpoint is written as a call ends).
The tools are an MCP server's over stdio that logs each call's start and end."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.servers.openai_stub import openai_stub

from .cli_runs import (
    REPO,
    SCRIPT,
    Run,
    cli,
    cli_env,
    script_model,
    start_run,
    stop_run,
    tool_call,
)
from .test_no_wait_step import Step

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

SERVER = REPO / "tests" / "servers" / "logged_stdio.py"


def _config(directory: Path, model: str) -> Path:
    config = directory / "agent-gateway.toml"
    config.write_text(
        f'[mcpServers.ctr]\ncommand = "{sys.executable}"\nargs = ["{SERVER}"]\n'
        f'[agents.assistant]\nmodel = "{model}"\ntools = ["ctr"]\n'
    )
    return config


def _result(step: dict[str, Any]) -> str:
    """What the MCP tool returned, as the step's observation carries it."""
    return json.loads(step["observation"])["result"]


def _shown_calls(run_id: str, store: str) -> list[dict[str, Any]]:
    """The tool calls `runs show --json` lists as ended (recorded) for the run."""
    shown = cli("runs", "show", run_id, "--store", store, "--json")
    assert shown.returncode == 0, shown.stderr
    calls = json.loads(shown.stdout)["calls"]
    return [c for c in calls if c["kind"] == "tool" and not c.get("in_flight")]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_a_run_stopped_in_its_second_model_call_says_the_calls_of_its_first_step(
    tmp_path: Path, stop: signal.Signals
) -> None:
    log, store = tmp_path / "calls.log", f"sqlite:///{tmp_path / 'runs.sqlite'}"
    both = [
        {"name": "ctr__logged", "arguments": {"log": str(log), "name": "A"}},
        {"name": "ctr__logged", "arguments": {"log": str(log), "name": "B"}},
    ]
    with openai_stub([both, "A and B are done"], hold_at=2) as model:
        config = _config(tmp_path, model.spec)
        run = await start_run("use both", "--json", "--config", str(config), "--store", store)
        try:
            assert await anyio.to_thread.run_sync(model.holding.wait, 60)
            run.process.send_signal(stop)
            code, out = await run.finish()
        finally:
            await stop_run(run)
    assert code == 128 + stop, run.err
    assert sorted(log.read_text().splitlines()) == ["end A", "end B", "start A", "start B"]
    stopped = json.loads(out)
    assert stopped["status"] == "stopped"
    # Was [] and the first model call's numbers only: the checkpoint before the calls ran.
    steps = [(s["tool"], s["input"]["name"], _result(s)) for s in stopped["steps"]]
    assert steps == [("ctr__logged", "A", "A done"), ("ctr__logged", "B", "B done")]
    assert (stopped["iterations"], stopped["usage"]["requests"]) == (1, 1)
    # As the store has them: `runs show` lists the same calls, ended.
    shown = _shown_calls(stopped["run_id"], store)
    assert [c["call_id"] for c in shown] == [s["call_id"] for s in stopped["steps"]]


async def test_a_run_stopped_in_a_tool_call_says_the_calls_of_the_step_that_ended(
    tmp_path: Path,
) -> None:
    log, hold = tmp_path / "calls.log", tmp_path / "hold"
    hold.touch()
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    first = [tool_call("ctr__logged", "a", log=str(log), name="A")]
    second = [
        tool_call("ctr__logged", "c", log=str(log), name="C"),
        tool_call("ctr__logged", "b", log=str(log), name="B", hold=str(hold)),
    ]
    model = script_model(
        tmp_path / "model.json", {"tool_calls": first}, {"tool_calls": second}, {"content": "-"}
    )
    config = _config(tmp_path, model)
    run = await start_run("go", "--json", "--config", str(config), "--store", store)
    try:
        await run.until("logged: holding B", "recorded tool 0 c")
        run.process.send_signal(signal.SIGINT)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130, run.err
    stopped = json.loads(out)
    # The first step's call, and the second's that ended; not B, under way.
    assert [(s["call_id"], _result(s)) for s in stopped["steps"]] == [
        ("a", "A done"),
        ("c", "C done"),
    ]
    assert stopped["iterations"] == 2
    assert [c["call_id"] for c in _shown_calls(stopped["run_id"], store)] == ["a", "c"]


async def test_a_run_interrupted_waiting_for_approval_says_the_call_of_the_step_that_ended(
    tmp_path: Path,
) -> None:
    """W ends (recorded) while the calculator beside it waits for a person; Ctrl-C then."""
    step = Step(tmp_path)
    process = await anyio.open_process(
        [str(SCRIPT), "-v", "run", "go", "--config", str(step.config), *step.store, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=cli_env(),
    )
    run = Run(process)
    try:
        await run.until("gated: waiting for W", "waiting for approval:")
        await step.release()
        await run.until("recorded tool 0 w")
        run.process.send_signal(signal.SIGINT)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130, run.err
    stopped = json.loads(out)
    assert stopped["status"] == "waiting_approval"
    assert [(s["call_id"], s["observation"]) for s in stopped["steps"]] == [("w", "W done")]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT])
async def test_a_run_interrupted_inside_sub_agents_names_them_in_stopped_in(
    tmp_path: Path, stop: signal.Signals
) -> None:
    """assistant -> mid -> two `inner` runs side by side, each in a tool call: a signal then
    stops the run there, which `stopped_in` says as far down as the two go together."""
    log, hold = tmp_path / "calls.log", tmp_path / "hold"
    hold.touch()
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    top = script_model(tmp_path / "top.json", {"tool_calls": [tool_call("mid", "m", prompt="on")]})
    mid = script_model(
        tmp_path / "mid.json",
        {
            "tool_calls": [
                tool_call("inner", "i1", prompt="1"),
                tool_call("inner", "i2", prompt="2"),
            ]
        },
    )
    held = [tool_call("ctr__logged", n, log=str(log), name=n, hold=str(hold)) for n in "BC"]
    inner = script_model(
        tmp_path / "inner.json", {"tool_calls": held[:1]}, {"tool_calls": held[1:]}
    )
    config = _config(tmp_path, top)
    config.write_text(
        config.read_text().replace('tools = ["ctr"]', 'tools = ["mid"]')
        + f'[agents.mid]\nmodel = "{mid}"\ntools = ["inner"]\n'
        f'[agents.inner]\nmodel = "{inner}"\ntools = ["ctr"]\n'
    )
    args = ("go", "--agent", "assistant", "--json", "--config", str(config), "--store", store)
    run = await start_run(*args)
    try:
        await run.until("logged: holding B", "logged: holding C")
        run.process.send_signal(stop)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 128 + stop, run.err
    stopped = json.loads(out)
    assert stopped["status"] == "stopped"
    assert stopped["stopped_in"] == ["assistant", "mid", "inner"]  # was null
