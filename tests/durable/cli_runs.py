"""The `agent-gateway` command line in subprocesses, for the stored-run tests: a `run` read
as it goes, `runs ...` and other commands run to their end, scripted models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "agent-gateway"


def cli_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, cwd=REPO, env=cli_env(), timeout=40
    )


def tool_call(tool: str, call_id: str, **arguments: str) -> dict[str, Any]:
    return {"name": tool, "id": call_id, "arguments": arguments}


def script_model(path: Path, *answers: Any) -> str:
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


async def start_run(*args: str) -> Run:
    process = await anyio.open_process(
        [str(SCRIPT), "-v", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=REPO,
        env=cli_env(),
    )
    return Run(process)


async def stop_run(run: Run) -> None:
    if run.process.returncode is None:
        run.process.kill()
        with anyio.CancelScope(shield=True):
            await run.process.wait()


def list_runs(store: str) -> list[dict[str, Any]]:
    listed = cli("runs", "list", "--json", "--store", store)
    assert listed.returncode == 0, listed.stderr
    return json.loads(listed.stdout)


STOPPING_TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.gated]\npython = "tests.durable_tools:gated"\n'
)


class TwoCalls:
    """A run on `store` of two tool calls at once: A ends (recorded), B waits at its gate; the
    store's outage (or lock) waits `wait` s ([store] unreachable_wait)."""

    def __init__(self, directory: Path, store: str, wait: float) -> None:
        self.store = store
        self.log, self.gate = directory / "calls.log", directory / "gate"
        os.mkfifo(self.gate)
        self.config = directory / "agent-gateway.toml"
        self.config.write_text(f"[store]\nunreachable_wait = {wait}\n{STOPPING_TOOLS}")
        both = [
            tool_call("logged", "a", log=str(self.log), name="A"),
            tool_call("gated", "b", log=str(self.log), name="B", gate=str(self.gate)),
        ]
        self.first = script_model(
            directory / "first.json", {"tool_calls": both}, {"content": "A and B are done"}
        )
        self.second = script_model(directory / "second.json", {"content": "A and B are done"})

    async def start(self) -> Run:
        run = await start_run(
            "use both", "--config", str(self.config), "--store", self.store, "--model", self.first
        )
        await run.until("gated: waiting for B", "recorded tool 0 a")
        return run

    async def release(self) -> None:
        """B ends: its record is what waits for the store now."""
        await anyio.to_thread.run_sync(lambda: open(self.gate, "w").close())

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()
