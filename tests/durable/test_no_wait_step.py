"""`--no-wait` in a step that makes a gated call and an ungated (or approved) one, in a stored
(SQLite) run: the run stops waiting for the person at once, but returns only once the other
call has ended and is recorded, so it runs once across `--no-wait`, `runs approve`, `resume`.
Ctrl-C or SIGTERM meanwhile cuts it off at once, and it runs again on resume, as after a
kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from functools import partial
from pathlib import Path

import anyio
import pytest

from .cli_runs import REPO, SCRIPT, Run, cli, cli_env, script_model, stop_run, tool_call

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]


class Step:
    """A model that asks, in one step, for the `gated` tool (`W`, held at a FIFO until the
    test releases it, each start and end logged) and for the calculator; the tools `gated`
    names need approval."""

    def __init__(self, directory: Path, gated: tuple[str, ...] = ("calculator",)) -> None:
        self.log = directory / "calls.log"
        self.gate = directory / "gate"
        os.mkfifo(self.gate)
        self.model = directory / "model.json"
        work = tool_call("gated", "w", log=str(self.log), name="W", gate=str(self.gate))
        ask = [work, tool_call("calculator", "c", expression="6 * 7")]
        script_model(self.model, {"tool_calls": ask}, {"content": "not asked: c waits"})
        self.config = directory / "agent-gateway.toml"
        self.config.write_text(
            '[tools.gated]\npython = "tests.durable_tools:gated"\n'
            '[tools.calculator]\nbuiltin = "calculator"\n'
            f'[agents.assistant]\nmodel = "scripted:{self.model}"\n'
            f'tools = ["gated", "calculator"]\nrequire_approval = {json.dumps(list(gated))}\n'
        )
        self.store = ["--state-dir", str(directory / "state")]

    async def left_waiting(self, *command: str) -> Run:
        """`command` (else `run`) with `--no-wait`, once W is under way and the calculator's
        wait was left."""
        command = command or ("run", "go", "--config", str(self.config))
        process = await anyio.open_process(
            [str(SCRIPT), "-v", *command, *self.store, "--no-wait", "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=cli_env(),
        )
        run = Run(process)
        await run.until("gated: waiting for W", "waiting for approval:")
        return run

    async def release(self) -> None:
        """Let W end (once it waits at the FIFO)."""
        with anyio.fail_after(40):
            writer = await anyio.to_thread.run_sync(
                partial(open, self.gate, "wb"), abandon_on_cancel=True
            )
        writer.close()

    async def released_until_returned(self, run: Run) -> tuple[int, str]:
        """`release` W while the run finishes; its exit code and stdout."""
        returned: tuple[int, str] | None = None
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self.release)
            returned = await run.finish()
            tasks.cancel_scope.cancel()  # returned before W waited at the FIFO: a failure
        assert returned is not None
        return returned

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()

    def approve_and_resume(self, run_id: str) -> None:
        approved = cli("runs", "approve", run_id, "c", *self.store)
        assert approved.returncode == 0, approved.stderr
        self.gate.unlink()  # W, run again, would not wait
        script_model(self.model, {"content": "W done, 42."})
        resumed = cli("resume", run_id, *self.store, "--json")
        assert resumed.returncode == 0, resumed.stderr
        assert json.loads(resumed.stdout)["output"] == "W done, 42."


async def test_the_ungated_call_of_the_step_ends_before_no_wait_returns_and_runs_once(
    tmp_path: Path,
) -> None:
    step = Step(tmp_path)
    run = await step.left_waiting()
    try:
        code, out = await step.released_until_returned(run)
    finally:
        await stop_run(run)
    assert code == 3, run.err
    stopped = json.loads(out)
    assert stopped["status"] == "waiting_approval"
    assert [w["short"] for w in stopped["waiting"]] == ["c"]
    assert step.calls() == ["start W", "end W"]  # W ended before the command returned
    assert "recorded tool 0 w" in run.err
    # Said as done (it will not run again), though only its record holds it: was [].
    assert [(s["call_id"], s["observation"]) for s in stopped["steps"]] == [("w", "W done")]
    assert stopped["iterations"] == 1

    step.approve_and_resume(stopped["run_id"])
    assert step.calls() == ["start W", "end W"]  # answered from its record, not made again


async def test_a_signal_while_no_wait_finishes_the_step_cuts_it_off_at_once(
    tmp_path: Path,
) -> None:
    step = Step(tmp_path)
    run = await step.left_waiting()
    try:
        run.process.send_signal(signal.SIGTERM)  # W still waits: it is not waited for
        await run.until("interrupted: run ")
        await step.release()  # the cut-off call's thread, left blocked at the FIFO, ends
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 128 + signal.SIGTERM, run.err
    stopped = json.loads(out)
    assert step.calls() == ["start W"]
    assert "recorded tool 0 w" not in run.err

    listed = cli("runs", "list", "--json", *step.store)
    [info] = json.loads(listed.stdout)
    assert [w["short"] for w in info["waiting"]] == ["c"]  # still waiting for its decision
    # Worded as `runs list` words it: c needs a person first.
    assert (stopped["status"], info["status"]) == ("waiting_approval", "waiting_approval")
    assert [w["short"] for w in stopped["waiting"]] == ["c"]
    step.approve_and_resume(stopped["run_id"])
    assert step.calls() == ["start W", "start W", "end W"]  # cut off: made again, as after a kill


async def test_an_approved_call_still_running_ends_before_no_wait_returns_and_runs_once(
    tmp_path: Path,
) -> None:
    step = Step(tmp_path, gated=("gated", "calculator"))
    started = cli("run", "go", "--config", str(step.config), *step.store, "--no-wait", "--json")
    assert started.returncode == 3, started.stderr
    run_id = json.loads(started.stdout)["run_id"]
    assert cli("runs", "approve", run_id, "w", *step.store).returncode == 0
    run = await step.left_waiting("resume", run_id)  # W approved and running, c undecided
    try:
        code, out = await step.released_until_returned(run)
    finally:
        await stop_run(run)
    assert code == 3, run.err
    assert [w["short"] for w in json.loads(out)["waiting"]] == ["c"]
    assert step.calls() == ["start W", "end W"]

    step.approve_and_resume(run_id)
    assert step.calls() == ["start W", "end W"]
