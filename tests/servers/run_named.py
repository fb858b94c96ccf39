"""A stdio MCP server whose tools are named like `serve`'s run tools: `get_run` (answers
`get_run:` and its arguments, sorted) and `grow`, which adds `approve_run` (alike) and says
its tools changed. `python tests/servers/run_named.py`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from tests.servers.inprocess import Context, ToyServer, text_result

__all__ = ["run_named"]


def run_named() -> ToyServer:
    toy = ToyServer("run-named")
    toy.add_echo("get_run")

    async def grow(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        toy.add_echo("approve_run")
        await toy.announce_change(ctx)
        return text_result("grown")

    toy.add("grow", grow)
    return toy


async def _serve() -> None:
    server = run_named().server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_serve)
