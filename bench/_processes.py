"""Servers as subprocesses, for the benchmarks that cross a process boundary.

A process is ready when it prints its ready line on stderr (the URL follows it) or, for peers
that print nothing we can parse, when its port accepts connections. stderr is read for the
process's whole life (a full pipe would stall a chatty server) and its tail is kept for errors.
On exit the process and everything it started are stopped, by their ids.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections import deque
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import psutil
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

REPO = Path(__file__).resolve().parents[1]
READY = "agent-gateway: serving MCP on "
"""The line `agent-gateway serve --http` prints to stderr once it listens."""
START_TIMEOUT = 180
"""Seconds a server may take to start: a front of 50 servers on a loaded 2-core machine is slow."""


class StartError(RuntimeError):
    """A server process ended or timed out before it was ready."""


@dataclass
class Running:
    process: Process
    url: str
    stderr: deque[str] = field(default_factory=lambda: deque[str](maxlen=30))

    @property
    def pid(self) -> int:
        return self.process.pid


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process itself (all its threads, not its children).

    On Linux from the process's CPU clock, to the nanosecond: psutil's figure counts clock
    ticks (10 ms), more than a short run of calls costs, so a side could read 0.
    """
    if sys.platform == "linux":
        # clock_getcpuclockid(pid) as the kernel builds it: ~pid << 3 | CPUCLOCK_SCHED.
        return time.clock_gettime(~pid << 3 | 2)
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def free_port() -> int:
    """A port free on 127.0.0.1 now, for peers that cannot report the one they bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def _accepts(port: int) -> bool:
    try:
        stream = await anyio.connect_tcp("127.0.0.1", port)
    except OSError:
        return False
    await stream.aclose()
    return True


@asynccontextmanager
async def running(
    command: Sequence[str],
    *,
    ready: str | None = None,
    port: int | None = None,
    url: str = "",
    env: Mapping[str, str] | None = None,
    ready_within: float = START_TIMEOUT,
) -> AsyncGenerator[Running]:
    """Start `command`; yield once it printed a line with `ready` in it (the URL is the
    rest of that line) or once `port` accepts connections (then the URL is `url`)."""
    process = await anyio.open_process(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    served = Running(process=process, url=url)
    announced = anyio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(process.stderr, errors="replace"):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                served.stderr.append(line)
                # `serve` puts the time before it.
                if ready is not None and ready in line and not announced.is_set():
                    served.url = line.partition(ready)[2].strip()
                    announced.set()
        announced.set()  # ended before it was ready: the check below says so

    async def wait_ready() -> None:
        if ready is not None:
            await announced.wait()
            return
        assert port is not None
        while not await _accepts(port):
            if process.returncode is not None:
                return
            await anyio.sleep(0.01)

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stderr)
            try:
                with anyio.fail_after(ready_within):
                    await wait_ready()
            except TimeoutError:
                raise StartError(f"{command[0]} not ready in {ready_within} s") from None
            if process.returncode is not None or (ready is not None and not served.url):
                tail = "\n".join(served.stderr)
                raise StartError(f"{' '.join(command)} did not start:\n{tail}")
            yield served
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)


async def stop(process: Process) -> None:
    """Stop the process, then whatever it started and left behind (by pid, never by name)."""
    try:
        children = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        children = []
    if process.returncode is None:
        process.terminate()
        with anyio.move_on_after(10):
            await process.wait()
        if process.returncode is None:
            process.kill()
            await process.wait()
    await process.aclose()
    alive: list[psutil.Process] = []
    for child in children:
        try:
            child.terminate()
            alive.append(child)
        except psutil.Error:
            pass
    _gone, left = await anyio.to_thread.run_sync(lambda: psutil.wait_procs(alive, timeout=5))
    for child in left:
        with suppress(psutil.Error):
            child.kill()


@asynccontextmanager
async def http_process(command: list[str]) -> AsyncGenerator[str]:
    """Start a gateway serving HTTP on a free port; yield its URL once it is bound."""
    async with running(command, ready=READY, ready_within=30) as served:
        yield served.url
