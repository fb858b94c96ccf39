"""A stored run's gated calls wait for `runs approve|deny` from another process: on SQLite and
PostgreSQL, with the step's other calls running meanwhile, three agents deep, and across a
kill -9 of the waiting process. Every call ends with exactly one result."""

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
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from tests.servers.openai_stub import openai_stub

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "agent-gateway"
TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
)
AGENT = '[agents.assistant]\ntools = ["logged", "guarded"]\nrequire_approval = ["guarded"]\n'


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=40
    )


def _call(tool: str, call_id: str, **arguments: str) -> dict[str, Any]:
    return {"name": tool, "id": call_id, "arguments": arguments}


def _script(path: Path, *answers: Any) -> str:
    path.write_text(json.dumps(list(answers)))
    return f"scripted:{path}"


class Run:
    """`agent-gateway -v run ...` in a subprocess, its stderr read as it comes."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.err = ""
        assert process.stderr is not None
        self._lines = TextReceiveStream(process.stderr)

    async def until(self, *texts: str, count: int = 1) -> None:
        with anyio.fail_after(40):
            while not all(self.err.count(text) >= count for text in texts):
                self.err += await self._lines.receive()

    async def finish(self) -> tuple[int, str]:
        """Its exit code and stdout, once it ended."""
        assert self.process.stdout is not None
        out = ""
        with anyio.fail_after(40):
            async for chunk in TextReceiveStream(self.process.stdout):
                out += chunk
            async for chunk in self._lines:
                self.err += chunk
            return await self.process.wait(), out


async def _start(*args: str) -> Run:
    process = await anyio.open_process(
        [str(SCRIPT), "-v", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=_env(),
    )
    return Run(process)


async def _stop(run: Run) -> None:
    if run.process.returncode is None:
        run.process.kill()
        with anyio.CancelScope(shield=True):
            await run.process.wait()


def _runs(store: str) -> list[dict[str, Any]]:
    listed = _cli("runs", "list", "--json", "--store", store)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


async def test_a_call_waits_for_approval_from_another_process(tmp_path: Path, store: str) -> None:
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    model = _script(
        tmp_path / "s.json",
        {"tool_calls": [_call("guarded", "g1", log=str(log), name="G")]},
        {"content": "G is done"},
    )
    run = await _start("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded")
        assert not log.exists()
        [waiting] = _runs(store)
        assert waiting["status"] == "waiting_approval"
        assert [w["short"] for w in waiting["waiting"]] == ["g1"]
        approved = _cli("runs", "approve", waiting["run_id"], "g1", "--store", store)
        assert approved.returncode == 0, approved.stderr
        assert approved.stderr.startswith('approved g1: guarded {"log"')
        assert await run.finish() == (0, "G is done\n")
    finally:
        await _stop(run)
    assert log.read_text().splitlines() == ["start G", "end G"]
    assert _runs(store)[0]["status"] == "succeeded"


async def test_a_denial_reaches_the_model_with_the_message(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    call = {"name": "guarded", "arguments": {"log": str(log), "name": "G"}}
    with openai_stub([call, "Fine, I will not."]) as model:
        config = tmp_path / "agent-gateway.toml"
        config.write_text(TOOLS + AGENT + f'model = "{model.spec}"\n')
        run = await _start("go", "--config", str(config), "--store", store)
        try:
            await run.until("waiting for approval: guarded")
            [waiting] = _runs(store)
            denied = _cli(
                "runs", "deny", waiting["run_id"], "--message", "not today", "--store", store
            )
            assert denied.returncode == 0, denied.stderr
            assert await run.finish() == (0, "Fine, I will not.\n")
        finally:
            await _stop(run)
        told = model.messages(1)[-1]
    assert told["role"] == "tool"
    assert told["content"] == (
        "The user rejected the tool call to guarded; it did not run. The user said: not today"
    )
    assert not log.exists()


async def test_parallel_calls_approved_denied_and_ungated_each_get_one_result(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    three = [
        _call("logged", "a", log=str(log), name="A"),
        _call("guarded", "b", log=str(log), name="B"),
        _call("guarded", "c", log=str(log), name="C"),
    ]
    model = _script(tmp_path / "s.json", {"tool_calls": three}, {"content": "A, B; not C"})
    run = await _start("go", "--config", str(config), "--store", store, "--model", model)
    try:
        await run.until("waiting for approval: guarded", count=2)
        await run.until("recorded tool 0 a")  # it ran while the others wait
        [waiting] = _runs(store)
        assert sorted(w["short"] for w in waiting["waiting"]) == ["b", "c"]
        run_id = waiting["run_id"]
        assert (
            _cli("runs", "deny", run_id, "c", "--message", "no C", "--store", store).returncode == 0
        )
        assert _cli("runs", "approve", run_id, "b", "--store", store).returncode == 0
        assert await run.finish() == (0, "A, B; not C\n")
    finally:
        await _stop(run)
    assert sorted(log.read_text().splitlines()) == ["end A", "end B", "start A", "start B"]
    shown = json.loads(_cli("runs", "show", run_id, "--json", "--store", store).stdout)
    tools = {c["call_id"]: c for c in shown["calls"] if c["kind"] == "tool"}
    assert {call: tool["output"] for call, tool in tools.items()} == {
        "a": {"response": "A done"},
        "b": {"response": "B done"},
        "c": "The user rejected the tool call to guarded; it did not run. The user said: no C",
    }
    assert tools["a"]["approval"] is None
    assert tools["b"]["approval"] == {"approved": True, "message": None}
    assert tools["c"]["approval"] == {"approved": False, "message": "no C"}


async def test_an_approval_three_agents_deep_surfaces_on_the_outermost_run(
    tmp_path: Path,
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.sqlite'}"
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        TOOLS
        + '[agents.lead]\ntools = ["middle"]\n[agents.middle]\ntools = ["leaf"]\n'
        + '[agents.leaf]\ntools = ["guarded"]\nrequire_approval = ["guarded"]\n'
    )
    model = _script(
        tmp_path / "s.json",
        {"tool_calls": [_call("middle", "m1", prompt="ask the leaf")]},
        {"tool_calls": [_call("leaf", "l1", prompt="write W")]},
        {"tool_calls": [_call("guarded", "w1", log=str(log), name="W")]},
        {"content": "leaf: W written"},
        {"content": "middle: the leaf wrote W"},
        {"content": "lead: done"},
    )
    args = ["go", "--config", str(config), "--store", store, "--agent", "lead", "--model", model]
    run = await _start(*args)
    try:
        await run.until("waiting for approval: guarded")
        assert "runs approve" in run.err
        assert "m1/l1/w1" in run.err
        [waiting] = _runs(store)
        assert (waiting["agent"], waiting["status"]) == ("lead", "waiting_approval")
        [asked] = waiting["waiting"]
        assert (asked["short"], asked["agents"]) == ("m1/l1/w1", ["lead", "middle", "leaf"])
        assert _cli("runs", "approve", waiting["run_id"], "--store", store).returncode == 0
        assert await run.finish() == (0, "lead: done\n")
    finally:
        await _stop(run)
    assert log.read_text().splitlines() == ["start W", "end W"]


async def test_a_run_killed_while_waiting_for_approval_resumes_after_it(
    tmp_path: Path, store: str
) -> None:
    log = tmp_path / "calls.log"
    config = tmp_path / "agent-gateway.toml"
    config.write_text(TOOLS + AGENT)
    two = [
        _call("logged", "a", log=str(log), name="A"),
        _call("guarded", "b", log=str(log), name="B"),
    ]
    first = _script(tmp_path / "first.json", {"tool_calls": two})
    run = await _start("go", "--config", str(config), "--store", store, "--model", first)
    try:
        await run.until("waiting for approval: guarded", "recorded tool 0 a")
        run.process.send_signal(signal.SIGKILL)
        assert await run.process.wait() == -signal.SIGKILL
    finally:
        await _stop(run)
    [waiting] = _runs(store)
    assert waiting["status"] == "waiting_approval"
    assert "ended before the run did" in waiting["error"]
    run_id = waiting["run_id"]
    approved = _cli("runs", "approve", run_id, "b", "--store", store)
    assert approved.returncode == 0, approved.stderr
    assert f"`agent-gateway resume {run_id}` continues it" in approved.stderr

    second = _script(tmp_path / "second.json", {"content": "A and B are done"})
    resumed = _cli("resume", run_id, "--store", store, "--model", second)
    assert (resumed.returncode, resumed.stdout) == (0, "A and B are done\n"), resumed.stderr
    assert "waiting for approval" not in resumed.stderr  # the decision was in the store
    # A had finished before the kill: not run again; B ran once, after the approval.
    assert log.read_text().splitlines() == ["start A", "end A", "start B", "end B"]
