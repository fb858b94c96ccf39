"""An MCP server written the usual way, run over stdio: `python tests/servers/piped.py`.

For calls passed through a stdio pipe: the usual tools (`usual_tools`: `echo`, `fail`, `big`,
`steps`, `ask`), `wait` (reports progress 0, then waits until cancelled), `cancelled`
(answers once a `wait` was cancelled), `slow` (reports progress 0, then answers once `release`
was called), `pid`, `die` (the process exits mid-call) and `grow` (adds a tool and says so
with `tools/list_changed`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context

from tests.servers.usual_tools import add_usual_tools

server = MCPServer("piped")
_cancelled = anyio.Event()
_released = anyio.Event()


add_usual_tools(server)


@server.tool()
async def wait(ctx: Context) -> str:
    """Say it started (progress 0), then wait until cancelled."""
    await ctx.report_progress(0, None, "waiting")
    try:
        await anyio.sleep_forever()
    finally:
        _cancelled.set()
    return "never"  # pragma: no cover


@server.tool()
async def cancelled() -> str:
    """Answer once a `wait` was cancelled."""
    with anyio.fail_after(10):
        await _cancelled.wait()
    return "a wait was cancelled"


@server.tool()
async def slow(ctx: Context) -> str:
    """Say it started (progress 0), then answer once `release` was called."""
    await ctx.report_progress(0, None, "waiting for release")
    await _released.wait()
    return "released"


@server.tool()
def release() -> str:
    """Let `slow` answer."""
    _released.set()
    return "let go"


@server.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


@server.tool()
def die() -> str:
    """Exit the process mid-call."""
    os._exit(3)


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool `grown`, and tell the client the tools changed."""

    @server.tool()
    def grown() -> str:  # pyright: ignore[reportUnusedFunction]
        """Added by `grow`."""
        return "grown"

    await ctx.session.send_tool_list_changed()
    return "grew"


if __name__ == "__main__":
    server.run("stdio")
