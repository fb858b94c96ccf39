"""Two resumes of one stopped run at the same moment: exactly one runs it to its end, the other
says it was taken (exit 2). Never a hang, a traceback, or a run nobody resumes.

DBOS runs a run in the process that claimed it last; an execution that claimed it before learns
so at its next write. That process used to wait for an end nobody would record (a bare
`TimeoutError` 10 s later, or a hang), while the last claimer, seeing the first one's process
alive, stepped aside: nobody ran the run."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from agent import ScriptedModel
from gateway import AgentSpec, Gateway
from gateway.durable import open_runs
from gateway.run_state import RunResult
from toolkits import FunctionToolkit, function_tool

from .cli_runs import REPO, SCRIPT, cli, cli_env, list_runs, script_model, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(240)]

TAKEN = "was resumed by another process at the same moment: it runs there"


async def test_a_resume_claimed_after_another_began_runs_it_and_the_first_says_taken(
    tmp_path: Path, store: str
) -> None:
    """The tester's unlucky moment, made certain: resumer A runs the run (its tool call waits
    on a gate), then a second resumer claims it. The second runs it to its end; A says the
    run was taken (exit 2), once its tool call returns, and nothing is run by nobody."""
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    config = tmp_path / "agent-gateway.toml"
    config.write_text('[tools.gated]\npython = "tests.durable_tools:gated"\n')
    call = tool_call("gated", "b", log=str(log), name="B", gate=str(gate))
    # The run calls B, then its model is out of answers: it stops.
    first = script_model(tmp_path / "first.json", {"tool_calls": [call]})
    made = cli("run", "go", "--config", str(config), "--store", store, "--model", first)
    assert made.returncode == 1, made.stderr
    [run] = list_runs(store)
    assert run["status"] == "stopped"
    run_id = run["run_id"]
    # Resumed, its model asks for B again (a new call, B2), then answers.
    again = tool_call("gated", "b2", log=str(log), name="B", gate=str(gate))
    second = script_model(tmp_path / "second.json", {"tool_calls": [again]}, {"content": "done"})
    os.mkfifo(gate)
    resumer = await anyio.open_process(
        [str(SCRIPT), "runs", "resume", run_id, "--store", store, "--model", second],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=cli_env(),
    )
    try:
        assert resumer.stderr is not None
        said = ""
        with anyio.fail_after(60):
            async for chunk in TextReceiveStream(resumer.stderr):
                said += chunk
                if "gated: waiting for B" in said:
                    break
        # A runs the run. Another process claims it now (as `runs resume` does, once it
        # has found the run stopped: a moment before A began).
        ours_waiting, release = anyio.Event(), anyio.Event()

        async def gated(log: str, name: str, gate: str) -> str:
            """The test's own `gated`: held until the test releases it."""
            ours_waiting.set()
            await release.wait()
            return f"{name} done"

        gateway = Gateway(
            [FunctionToolkit("gated", [function_tool(gated)])],
            [AgentSpec("assistant", ScriptedModel(["done by the second"]), tools=["gated"])],
        )
        async with open_runs(store) as runs:
            runs.use(gateway)
            await runs.take_over(run_id)
            with anyio.fail_after(60):
                await ours_waiting.wait()  # its own call B2 runs too
                await anyio.to_thread.run_sync(_open_gate, gate)  # A's call returns...
                release.set()  # ...and this one's
                outcome = await runs.follow(run_id)  # was: "resumed by another process"
            assert isinstance(outcome, RunResult)
            assert outcome.items[0].output == "done by the second"
        with anyio.fail_after(60):
            out = await _read(resumer.stdout)
            said += await _read(resumer.stderr)
            code = await resumer.wait()
    finally:
        if resumer.returncode is None:
            resumer.kill()
            with anyio.CancelScope(shield=True):
                await resumer.wait()
    # A: told once its call returned (was: a DBOS warning, a 10 s wait, a TimeoutError).
    assert (code, out) == (2, ""), said
    assert TAKEN in said, said
    assert "Traceback" not in said, said
    [after] = list_runs(store)
    assert after["status"] == "succeeded"


async def test_pairs_of_resumes_at_once_each_run_once(tmp_path: Path, store: str) -> None:
    """The tester's loop: stopped runs, two `runs resume` of each started at the same moment,
    all at once (a loaded machine, as the tester's was)."""
    runs = 6 if store.startswith("sqlite") else 4
    empty = script_model(tmp_path / "empty.json")
    for n in range(runs):
        made = cli("run", f"run {n}", "--store", store, "--model", empty)
        assert made.returncode == 1, made.stderr
    ids = [run["run_id"] for run in list_runs(store)]
    assert len(ids) == runs
    answer = script_model(tmp_path / "answer.json", {"content": "resumed"})
    done: dict[str, list[subprocess.CompletedProcess[str]]] = {run_id: [] for run_id in ids}

    async def resume(run_id: str) -> None:
        args = ["runs", "resume", run_id, "--store", store, "--model", answer]
        done[run_id].append(await anyio.to_thread.run_sync(_resume, args))

    async with anyio.create_task_group() as tg:
        for run_id in ids:
            tg.start_soon(resume, run_id)
            tg.start_soon(resume, run_id)
    for run_id, pair in done.items():
        for each in pair:
            assert "Traceback" not in each.stderr, each.stderr
        won = [d for d in pair if d.returncode == 0]
        assert won, [d.stderr for d in pair]
        for each in won:
            assert each.stdout == "resumed\n", each.stderr
        # Known (closing note 33): on a loaded machine the run's first claimer may learn it
        # lost only at DBOS's last write, and then prints the owner's recorded answer (exit
        # 0) after its own model call ran too. The store has one outcome either way.
        for lost in (d for d in pair if d.returncode != 0):
            assert lost.returncode == 2, lost.stderr
            elsewhere = (TAKEN, "is running in process", "has ended (succeeded)")
            assert any(said in lost.stderr for said in elsewhere), lost.stderr
            assert "the run is stored" not in lost.stderr, (run_id, lost.stderr)
    statuses = {run["run_id"]: run["status"] for run in list_runs(store)}
    assert statuses == dict.fromkeys(ids, "succeeded")


def _resume(args: list[str]) -> subprocess.CompletedProcess[str]:
    # 90 s: a hang (the tester saw one of 16 minutes) is a failure, not a slow machine.
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=90
    )


def _open_gate(gate: Path) -> None:
    with open(gate, "wb"):  # a writer opens it and closes it: every waiting call goes on
        pass


async def _read(stream: Any) -> str:
    text = ""
    async for chunk in TextReceiveStream(stream):
        text += chunk
    return text
