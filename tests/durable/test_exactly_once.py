"""A run killed with SIGKILL is resumed by another process: same answer, and every call that
had finished (a tool call, a model call) is not made again. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import ByteReceiveStream, Process
from anyio.streams.text import TextReceiveStream
from dbos import DBOS

from agent import ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.durable import open_runs
from gateway.durable.status import RunInfo
from gateway.run_state import RunResult
from tests.durable_tools import logged
from tests.servers.openai_stub import openai_stub
from toolkits import FunctionToolkit, function_tool

# Each test runs four or five CLI processes one after another, each importing DBOS (~2 s
# alone): on a loaded machine that passed 60 s (three timeouts in six full runs at load 4-9).
pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "agent-gateway"
TOOLS = '[tools.logged]\npython = "tests.durable_tools:logged"\n'


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def _setup(directory: Path) -> tuple[Path, Path, Path, Path, Path]:
    log, hold = directory / "calls.log", directory / "hold"
    hold.touch()
    config = directory / "agent-gateway.toml"
    config.write_text(TOOLS)
    both = [
        {"name": "logged", "id": "a", "arguments": {"log": str(log), "name": "A"}},
        {
            "name": "logged",
            "id": "b",
            "arguments": {"log": str(log), "name": "B", "hold": str(hold)},
        },
    ]
    first = directory / "first.json"
    first.write_text(json.dumps([{"tool_calls": both}, {"content": "not reached"}]))
    second = directory / "second.json"
    second.write_text(json.dumps([{"content": "A and B are done"}]))
    return config, first, second, log, hold


async def _kill(process: Process) -> None:
    process.send_signal(signal.SIGKILL)
    assert await process.wait() == -signal.SIGKILL


async def _run_until_killed(args: list[str], *, recorded: str = "tool 0 a") -> None:
    """Start `run`, wait until B is held and A's result is recorded, then SIGKILL it."""
    process = await anyio.open_process(
        [str(SCRIPT), "-v", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(),
    )
    try:
        assert process.stderr is not None
        seen = ""
        with anyio.fail_after(40):
            async for chunk in TextReceiveStream(process.stderr):
                seen += chunk
                if "logged: holding B" in seen and f"recorded {recorded}" in seen:
                    break
        assert "tool 0 b" not in seen
        await _kill(process)
    finally:
        if process.returncode is None:
            process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


def _cli(*args: str, timeout: float = 40) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=timeout
    )


def _only_run(store: str, *, agent: str = "assistant") -> dict[str, str]:
    listed = _cli("runs", "list", "--json", "--store", store)
    assert listed.returncode == 0, listed.stderr
    [run] = json.loads(listed.stdout)
    assert run["status"] == "stopped"  # its process died
    assert run["agent"] == agent
    return run


async def test_a_finished_call_is_not_run_again_after_a_kill(tmp_path: Path, store: str) -> None:
    config, first, second, log, hold = _setup(tmp_path)
    common = ["--config", str(config), "--store", store]
    await _run_until_killed(["run", "use both", *common, "--model", f"scripted:{first}"])
    # A finished (and was recorded); B is in flight.
    assert sorted(log.read_text().splitlines()) == ["end A", "start A", "start B"]
    run = _only_run(store)
    shown = _cli("runs", "show", run["run_id"], "--store", store)
    assert shown.returncode == 0, shown.stderr
    heads = [line.split("─ ", 1)[1] for line in shown.stdout.splitlines() if "─ " in line]
    assert [head.split("  ")[0] for head in heads] == ["model", "tool logged", "tool logged"]
    assert heads[1].startswith("tool logged  a  ")  # it ended
    assert heads[2] == "tool logged  b  (in flight)"  # asked for, not recorded
    assert f'input  {{"log": "{log}", "name": "B", "hold": "{hold}"}}' in shown.stdout

    hold.unlink()
    resumed = _cli(
        "runs", "resume", run["run_id"], *common, "--model", f"scripted:{second}", "--json"
    )
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["output"] == "A and B are done"
    assert [s["observation"] for s in result["steps"]] == ["A done", "B done"]
    calls = log.read_text().splitlines()
    assert calls.count("start A") == 1  # recorded: not run again
    assert calls.count("start B") == 2  # in flight at the kill: run again...
    assert calls.count("end B") == 1  # ...and finished once

    shown = _cli("runs", "show", run["run_id"], "--json", "--store", store)
    assert shown.returncode == 0, shown.stderr
    details = json.loads(shown.stdout)
    assert details["status"] == "succeeded"
    names = [step["name"] for step in details["steps"]]
    assert names.count("tool 0 a") == 1
    assert names.count("tool 0 b") == 1


async def test_a_run_killed_mid_model_call_asks_only_that_call_again(
    tmp_path: Path, store: str
) -> None:
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    call = {"name": "logged", "arguments": {"log": str(log), "name": "A"}}
    # The second model call is held in flight: the run is killed there.
    with openai_stub([call, "A is done", "A is done"], hold_at=2) as model:
        config.write_text(
            f'{TOOLS}[agents.assistant]\nmodel = "{model.spec}"\ntools = ["logged"]\n'
        )
        common = ["--config", str(config), "--store", store]
        process = await anyio.open_process(
            [str(SCRIPT), "run", "use A", *common],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=REPO,
            env=_env(),
        )
        try:
            assert await anyio.to_thread.run_sync(model.holding.wait, 40)
            await _kill(process)
        finally:
            if process.returncode is None:
                process.kill()
                with anyio.CancelScope(shield=True):
                    await process.wait()
        assert log.read_text().splitlines() == ["start A", "end A"]
        run = _only_run(store)

        resumed = _cli("runs", "resume", run["run_id"], *common, "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == "A is done"
        # The first model call and the tool were recorded: only the call in flight is asked
        # again, with the very same messages.
        assert len(model.requests) == 3
        assert model.messages(2) == model.messages(1)
    assert log.read_text().splitlines() == ["start A", "end A"]


def test_a_store_url_that_is_not_one_is_bad_input(tmp_path: Path) -> None:
    done = _cli("runs", "list", "--store", "redis://127.0.0.1/0")
    assert done.returncode == 2
    assert "not a run store URL" in done.stderr
    missing = _cli("runs", "show", "r1", "--store", f"sqlite:///{tmp_path / 'none.sqlite'}")
    assert missing.returncode == 2
    assert "no runs are stored in" in missing.stderr


async def test_a_sub_agents_finished_calls_are_not_run_again(tmp_path: Path, store: str) -> None:
    log, hold = tmp_path / "calls.log", tmp_path / "hold"
    hold.touch()
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        f'{TOOLS}[agents.lead]\ntools = ["helper"]\n[agents.helper]\ntools = ["logged"]\n'
    )

    def call(tool: str, call_id: str, **arguments: str) -> dict[str, object]:
        return {"tool_calls": [{"name": tool, "id": call_id, "arguments": arguments}]}

    first = tmp_path / "first.json"
    first.write_text(
        json.dumps(
            [
                call("helper", "h1", prompt="log A, then B"),
                call("logged", "a", log=str(log), name="A"),
                call("logged", "b", log=str(log), name="B", hold=str(hold)),
            ]
        )
    )
    second = tmp_path / "second.json"
    second.write_text(json.dumps([{"content": "A and B"}, {"content": "the helper did A and B"}]))
    common = ["--config", str(config), "--store", store, "--agent", "lead"]
    await _run_until_killed(
        ["run", "go", *common, "--model", f"scripted:{first}"], recorded="h1/tool 0 a"
    )
    assert log.read_text().splitlines() == ["start A", "end A", "start B"]
    run = _only_run(store, agent="lead")
    shown = _cli("runs", "show", run["run_id"], "--store", store)
    assert shown.returncode == 0, shown.stderr
    heads = [line.rpartition("─ ")[::2] for line in shown.stdout.splitlines() if "─ " in line]
    assert [(indent, head.split("  ")[0]) for indent, head in heads] == [
        ("├", "model"),
        ("└", "tool helper"),
        ("   ├", "model"),
        ("   ├", "tool logged"),
        ("   ├", "model"),
        ("   └", "tool logged"),
    ]
    assert heads[1][1] == "tool helper  h1  (in flight)"  # its calls were recorded, not it
    assert heads[5][1] == "tool logged  b  (in flight)"

    hold.unlink()
    resumed = _cli(
        "runs", "resume", run["run_id"], "--store", store, "--model", f"scripted:{second}"
    )
    assert (resumed.returncode, resumed.stdout) == (0, "the helper did A and B\n"), resumed.stderr
    # A had finished inside the helper: it is not run again; B was in flight.
    assert log.read_text().splitlines() == ["start A", "end A", "start B", "start B", "end B"]


async def test_two_resumes_at_once_finish_the_run_once(tmp_path: Path, store: str) -> None:
    config, first, second, log, hold = _setup(tmp_path)
    common = ["--config", str(config), "--store", store]
    await _run_until_killed(["run", "use both", *common, "--model", f"scripted:{first}"])
    run = _only_run(store)
    hold.unlink()
    resume = ["runs", "resume", run["run_id"], *common, "--model", f"scripted:{second}"]
    done: list[subprocess.CompletedProcess[str]] = []

    async def resumed() -> None:
        # 90 s: two at once passed 40 s at load 15 (2 cores), in 2 of 10 tries before the fix.
        done.append(await anyio.to_thread.run_sync(lambda: _cli(*resume, timeout=90)))

    async with anyio.create_task_group() as tg:  # DBOS hands the run to the last to ask
        tg.start_soon(resumed)
        tg.start_soon(resumed)
    [won] = [d for d in done if d.returncode == 0]
    [lost] = [d for d in done if d.returncode != 0]
    assert won.stdout == "A and B are done\n"
    assert lost.returncode == 2
    elsewhere = (
        "resumed by another process at the same moment",
        "is running in process",
        # Under load the second may start only once the first has finished the run.
        "has ended (succeeded): it cannot be resumed",
    )
    assert any(said in lost.stderr for said in elsewhere), lost.stderr
    assert "the run is stored" not in lost.stderr  # it is not this one's to resume
    calls = log.read_text().splitlines()
    assert (calls.count("start A"), calls.count("start B"), calls.count("end B")) == (1, 2, 1)


async def test_a_resume_that_checked_the_run_first_keeps_the_other_from_running_it(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unlucky moment of two resumes, made certain: this process has found the run stopped
    and is about to claim it when another `runs resume` looks. The other used to find it
    stopped too, claim it and run B, in flight at the kill, alongside this one (B started
    three times). It waits for this one's claim, then finds the run running here."""
    config, first, second, log, hold = _setup(tmp_path)
    common = ["--config", str(config), "--store", store]
    await _run_until_killed(["run", "use both", *common, "--model", f"scripted:{first}"])
    run_id = _only_run(store)["run_id"]
    other = await anyio.open_process(
        [str(SCRIPT), "-v", "runs", "resume", run_id, *common, "--model", f"scripted:{second}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(),
    )
    said = ""
    try:
        async with open_runs(store) as runs:
            runs.use(
                Gateway(
                    [FunctionToolkit("logged", [function_tool(logged)])],
                    [AgentSpec("assistant", ScriptedModel(["A and B are done"]), tools=["logged"])],
                )
            )
            checked = runs.resumable

            async def resumable_and_the_other_looks(run_id: str) -> RunInfo:
                nonlocal said
                found = await checked(run_id)
                assert other.stderr is not None
                with anyio.fail_after(60):  # it runs B (held), or waits for this one
                    async for chunk in TextReceiveStream(other.stderr):
                        said += chunk
                        if "logged: holding B" in said or "being resumed by another" in said:
                            break
                hold.unlink()  # this one's B goes on
                return found

            monkeypatch.setattr(runs, "resumable", resumable_and_the_other_looks)
            with anyio.fail_after(60):
                result = await runs.resume(run_id)
            assert result.items[0].output == "A and B are done"
            calls = log.read_text().splitlines()  # B: at the kill, and here
            assert (calls.count("start A"), calls.count("start B"), calls.count("end B")) == (
                1,
                2,
                1,
            )
        assert other.stderr is not None
        with anyio.fail_after(60):
            said += await _read(other.stderr)
            assert await other.wait() == 2, said
    finally:
        if other.returncode is None:
            other.kill()
            with anyio.CancelScope(shield=True):
                await other.wait()
    assert any(told in said for told in ("is running in process", "has ended (succeeded)")), said
    assert log.read_text().splitlines().count("start B") == 2


async def test_a_take_over_and_a_resume_at_once_run_the_call_in_flight_once(
    tmp_path: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process taking a run over (a replica finishing a dead one's, a served client's
    follow) is claiming it when a `runs resume` of it looks. The take-over did not take the
    run's claim lock: the resume found the run stopped, claimed it and ran B, in flight at the
    kill, alongside the take-over (B started three times). It waits for the take-over's claim
    now, then finds the run running here."""
    config, first, second, log, hold = _setup(tmp_path)
    common = ["--config", str(config), "--store", store]
    await _run_until_killed(["run", "use both", *common, "--model", f"scripted:{first}"])
    run_id = _only_run(store)["run_id"]
    other = await anyio.open_process(
        [str(SCRIPT), "-v", "runs", "resume", run_id, *common, "--model", f"scripted:{second}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(),
    )
    said = ""
    try:
        async with open_runs(store) as runs:
            runs.use(
                Gateway(
                    [FunctionToolkit("logged", [function_tool(logged)])],
                    [AgentSpec("assistant", ScriptedModel(["A and B are done"]), tools=["logged"])],
                )
            )
            claiming = DBOS.resume_workflow_async

            async def claim_once_the_other_looked(run_id: str, **options: Any) -> Any:
                nonlocal said
                assert other.stderr is not None
                with anyio.fail_after(60):  # it runs B (held), or waits for this one
                    async for chunk in TextReceiveStream(other.stderr):
                        said += chunk
                        if "logged: holding B" in said or "being resumed by another" in said:
                            break
                hold.unlink()  # this one's B goes on
                return await claiming(run_id, **options)

            monkeypatch.setattr(DBOS, "resume_workflow_async", claim_once_the_other_looked)
            with anyio.fail_after(60):
                await runs.take_over(run_id)
                result = await runs.follow(run_id, pause=False)
            assert isinstance(result, RunResult)
            assert result.items[0].output == "A and B are done"
            calls = log.read_text().splitlines()  # B: at the kill, and here
            assert (calls.count("start A"), calls.count("start B"), calls.count("end B")) == (
                1,
                2,
                1,
            )
        assert other.stderr is not None
        with anyio.fail_after(60):
            said += await _read(other.stderr)
            assert await other.wait() == 2, said
    finally:
        if other.returncode is None:
            other.kill()
            with anyio.CancelScope(shield=True):
                await other.wait()
    assert "being resumed by another process" in said, said
    assert any(told in said for told in ("is running in process", "has ended (succeeded)")), said


async def _read(stream: ByteReceiveStream) -> str:
    text = ""
    async for chunk in TextReceiveStream(stream):
        text += chunk
    return text
