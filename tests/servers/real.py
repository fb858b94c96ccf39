"""Finding and starting the real MCP servers `.ci/install-servers` puts in `<repo>/.servers/`.

A test that needs one is skipped when it is not installed, with the reason, unless
`AGENT_GATEWAY_REQUIRE_SERVERS=1` (CI) makes that a failure. Every process started here is
ended when its context exits, and HTTP servers listen on 127.0.0.1 only.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, NoReturn

import anyio
import pytest
from anyio.abc import ByteReceiveStream
from anyio.streams.text import TextReceiveStream

from toolkits.mcp import McpServerConfig

__all__ = [
    "EVERYTHING",
    "SERVERS",
    "TIME_SERVER",
    "everything_http",
    "everything_stdio",
    "filesystem_stdio",
    "killable_everything_stdio",
    "read_pid",
    "require",
    "time_stdio",
]

REPO = Path(__file__).resolve().parents[2]
SERVERS = REPO / ".servers"
EVERYTHING = SERVERS / "node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM = SERVERS / "node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
TIME_SERVER = SERVERS / "py/bin/mcp-server-time"
LOOPBACK = Path(__file__).with_name("loopback.cjs")

log = logging.getLogger(__name__)


def require(path: Path) -> Path:
    """`path`, or skip (fail under `AGENT_GATEWAY_REQUIRE_SERVERS=1`) when it is missing."""
    if path.exists():
        return path
    _missing(f"{path.relative_to(REPO)} is not installed: run .ci/install-servers")


def _missing(reason: str) -> NoReturn:
    if os.environ.get("AGENT_GATEWAY_REQUIRE_SERVERS") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _node() -> str:
    found = shutil.which("node")
    if found is None:
        _missing("node is not on PATH (the npm MCP servers need Node 20+)")
    return found


def everything_stdio(**keys: Any) -> McpServerConfig:
    """server-everything over stdio; `keys` are further config keys."""
    return McpServerConfig(command=_node(), args=[str(require(EVERYTHING)), "stdio"], **keys)


def filesystem_stdio(root: Path, **keys: Any) -> McpServerConfig:
    """server-filesystem over stdio, on `root`; `keys` are further config keys."""
    return McpServerConfig(command=_node(), args=[str(require(FILESYSTEM)), str(root)], **keys)


def killable_everything_stdio(pid_file: Path, **keys: Any) -> McpServerConfig:
    """server-everything over stdio, writing its pid to `pid_file` on each start."""
    # `exec` keeps the pid: the file names the node process itself.
    script = 'echo $$ > "$0"; exec "$1" "$2" stdio'
    return McpServerConfig(
        command="bash",
        args=["-c", script, str(pid_file), _node(), str(require(EVERYTHING))],
        **keys,
    )


async def read_pid(pid_file: Path) -> int:
    return int((await anyio.Path(pid_file).read_text()).strip())


def time_stdio(**keys: Any) -> McpServerConfig:
    """mcp-server-time (a Python 2026-07-28 server) over stdio."""
    return McpServerConfig(
        command=str(require(TIME_SERVER)), args=["--local-timezone", "UTC"], **keys
    )


@asynccontextmanager
async def everything_http(
    transport: Literal["streamableHttp", "sse"], port: int = 0, *, pid: list[int] | None = None
) -> AsyncGenerator[str]:
    """Run server-everything over HTTP on 127.0.0.1 (`port`, or a free one); yields its endpoint
    URL (and puts its process id in `pid`, if given)."""
    js = require(EVERYTHING)
    process = await anyio.open_process(
        [_node(), "--require", str(LOOPBACK), str(js), transport],
        env={**os.environ, "PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    if pid is not None:
        pid.append(process.pid)
    try:
        assert process.stderr is not None
        lines = _lines(process.stderr)
        with anyio.fail_after(20):
            address = await _announced_address(lines)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_log_lines, lines)
            path = "/mcp" if transport == "streamableHttp" else "/sse"
            yield f"http://{address}{path}"
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await _stop(process)


async def _lines(stream: ByteReceiveStream) -> AsyncGenerator[str]:
    pending = ""
    async for chunk in TextReceiveStream(stream):
        *lines, pending = (pending + chunk).split("\n")
        for line in lines:
            yield line
    if pending:
        yield pending


async def _announced_address(lines: AsyncGenerator[str]) -> str:
    async for line in lines:
        log.info("server-everything: %s", line)
        if line.startswith("listening on "):
            return line.removeprefix("listening on ")
    raise RuntimeError("server-everything exited before listening")


async def _log_lines(lines: AsyncGenerator[str]) -> None:
    async for line in lines:
        log.info("server-everything: %s", line)


async def _stop(process: anyio.abc.Process) -> None:
    if process.returncode is None:
        os.killpg(process.pid, signal.SIGTERM)
        with anyio.move_on_after(5):
            await process.wait()
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    await process.aclose()
