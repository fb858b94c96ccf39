"""Gateways as subprocesses, for the benchmarks that cross a process boundary."""

from __future__ import annotations

import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.streams.text import TextReceiveStream

REPO = Path(__file__).resolve().parents[1]
READY = "agent-gateway: serving MCP on "
"""The line `agent-gateway serve --http` prints to stderr once it listens."""


@asynccontextmanager
async def http_process(command: list[str]) -> AsyncGenerator[str]:
    """Start a gateway serving HTTP on a free port; yield its URL once it is bound."""
    process = await anyio.open_process(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=REPO
    )
    url: list[str] = []
    ready = anyio.Event()

    async def read_stderr() -> None:
        assert process.stderr is not None
        buffer = ""
        async for chunk in TextReceiveStream(process.stderr):
            buffer += chunk
            *lines, buffer = buffer.split("\n")
            for line in lines:
                if line.startswith(READY):
                    url.append(line.removeprefix(READY))
                    ready.set()
        ready.set()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stderr)
            with anyio.fail_after(30):
                await ready.wait()
            if not url:
                raise RuntimeError(f"{command} did not start")
            yield url[0]
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            process.terminate()
            with anyio.move_on_after(10):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.aclose()
