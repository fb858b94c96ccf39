"""Real `agent-gateway serve` processes for the transport tests, cleaned up on every exit."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(sys.executable).parent / "agent-gateway"
READY = "agent-gateway: serving MCP on "
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")
"""What `serve` starts its lines with."""


def untimed(line: str) -> str:
    """`line` without the time `serve` starts it with (a line it did not write has none)."""
    time = TIME.match(line)
    return line[time.end() :] if time else line


def write_config(directory: Path, answers: object, *, gateway: str = "") -> Path:
    """A config serving the calculator (proxied) and an `assistant` agent replaying `answers`;
    `gateway` adds lines to its [gateway] table."""
    script = directory / "answers.json"
    script.write_text(json.dumps(answers))
    config = directory / "agent-gateway.toml"
    config.write_text(
        f"[gateway]\nexpose_tools = true\n{gateway}\n"
        '[tools.calculator]\nbuiltin = "calculator"\n'
        f'[agents.assistant]\nmodel = "scripted:{script}"\ntools = ["calculator"]\n'
        'description = "Answers questions with a calculator."\n'
    )
    return config


TIMES_42 = [
    {"tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]},
    {"content": "It is 42."},
]


@dataclass
class Served:
    url: str
    process: Process
    stderr: list[str] = field(default_factory=list[str])
    stderr_closed: anyio.Event = field(default_factory=anyio.Event)
    more_stderr: anyio.Event = field(default_factory=anyio.Event)
    """Set (and replaced) when a line arrives."""

    async def follow_stderr(self, on_line: Callable[[str], None] | None = None) -> None:
        """Read the process's stderr into `stderr`, line by line, until it closes."""
        assert self.process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(self.process.stderr):
            *lines, buffer = (buffer + chunk).split("\n")
            for line in lines:
                self.stderr.append(line)
                if on_line is not None:
                    on_line(line)
            self.more_stderr.set()
            self.more_stderr = anyio.Event()
        self.stderr_closed.set()
        self.more_stderr.set()

    async def line_starting(self, prefix: str) -> str:
        """The first stderr line starting with `prefix` (after its time), once there is one."""
        while True:
            more = self.more_stderr
            found = next((line for line in self.stderr if untimed(line).startswith(prefix)), None)
            if found is not None:
                return found
            assert not self.stderr_closed.is_set(), f"no line {prefix!r}: {self.stderr}"
            await more.wait()


@asynccontextmanager
async def http_server(
    config: Path,
    *extra: str,
    env: Mapping[str, str] | None = None,
    address: str = "127.0.0.1:0",
    under: Sequence[str] = (),
) -> AsyncGenerator[Served]:
    """`agent-gateway serve --http 127.0.0.1:0` (or at `address`), ready to take requests;
    started by `under` (a command that runs the rest, as `nohup`) if given."""
    serve = [str(SCRIPT), "serve", "--http", address, "--config", str(config), *extra]
    command = [*under, *serve]
    full_env = {**os.environ, **(env or {})}
    process = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=REPO, env=full_env
    )
    ready = anyio.Event()
    served = Served(url="", process=process)

    def note_ready(line: str) -> None:
        if untimed(line).startswith(READY):
            served.url = untimed(line).removeprefix(READY)
            ready.set()

    async def read_stderr() -> None:
        await served.follow_stderr(note_ready)
        ready.set()  # the process ended before it was ready: fail below, with its stderr

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stderr)
            with anyio.fail_after(30):
                await ready.wait()
            assert served.url, f"the server did not start: {served.stderr}"
            yield served
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


async def stop(process: Process) -> None:
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    await process.aclose()
