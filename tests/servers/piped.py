"""An MCP server written the usual way, run over stdio: `python tests/servers/piped.py`.

For calls passed through a stdio pipe: `echo`, `fail`, `big(n)` (n bytes of text), `steps(n)`
(progress and a log message per step), `ask` (elicits), `wait` (reports progress 0, then waits until cancelled), `cancelled`
(answers once a `wait` was cancelled), `pid`, `die` (the process exits mid-call) and `grow` (adds a
tool and says so with `tools/list_changed`).
"""

from __future__ import annotations

import os
import warnings

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel

server = MCPServer("piped")
_cancelled = anyio.Event()


class Name(BaseModel):
    name: str


@server.tool()
def echo(message: str) -> str:
    """Say it back."""
    return message


@server.tool()
def fail() -> str:
    """Always fails."""
    raise ValueError("it broke")


@server.tool()
def big(n: int) -> str:
    """n bytes of text."""
    return "x" * n


@server.tool()
async def steps(n: int, ctx: Context) -> str:
    """Report n steps of progress and log each."""
    for step in range(1, n + 1):
        await ctx.report_progress(step, n, f"step {step}")
        with warnings.catch_warnings():  # logging is deprecated at 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.info(f"step {step} of {n}")  # pyright: ignore[reportDeprecated]
    return f"{n} steps"


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the user for a name."""
    try:
        elicited = await ctx.elicit("Your name?", Name)
    except Exception as exc:
        return f"could not ask: {exc}"
    return f"user is {elicited.data.name if elicited.action == 'accept' else elicited.action}"


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
