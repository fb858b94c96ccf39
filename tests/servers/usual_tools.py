"""The tools every pass-through downstream has, written the usual way: `echo`, `fail`,
`big(n)` (n bytes of text), `steps(n)` (progress and a log message per step), `levels` (a log
message at debug and one at warning) and `ask` (elicits a `Name`). The HTTP downstream of `tests/server/test_pass_through.py` and the stdio
one of `piped.py` add them to their servers, so both transports answer the same calls."""

from __future__ import annotations

import warnings

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning
from pydantic import BaseModel

__all__ = ["Name", "add_usual_tools"]


class Name(BaseModel):
    name: str


def add_usual_tools(server: MCPServer) -> None:
    @server.tool()
    def echo(message: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Say it back."""
        return message

    @server.tool()
    def fail() -> str:  # pyright: ignore[reportUnusedFunction]
        """Always fails."""
        raise ValueError("it broke")

    @server.tool()
    def big(n: int) -> str:  # pyright: ignore[reportUnusedFunction]
        """n bytes of text."""
        return "x" * n

    @server.tool()
    async def steps(n: int, ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Report n steps of progress and log each."""
        for step in range(1, n + 1):
            await ctx.report_progress(step, n, f"step {step}")
            with warnings.catch_warnings():  # logging is deprecated at 2026-07-28
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await ctx.info(f"step {step} of {n}")  # pyright: ignore[reportDeprecated]
        return f"{n} steps"

    @server.tool()
    async def levels(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Log at debug, then at warning."""
        with warnings.catch_warnings():  # logging is deprecated at 2026-07-28
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await ctx.debug("at debug")  # pyright: ignore[reportDeprecated]
            await ctx.warning("at warning")  # pyright: ignore[reportDeprecated]
        return "logged"

    @server.tool()
    async def ask(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Ask the user for a name."""
        try:
            elicited = await ctx.elicit("Your name?", Name)
        except Exception as exc:
            return f"could not ask: {exc}"
        return f"user is {elicited.data.name if elicited.action == 'accept' else elicited.action}"
