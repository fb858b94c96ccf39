"""Serving over stdin/stdout: what Claude Desktop and other local clients launch.

stdout carries the protocol only: logs and traces go to stderr.
"""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.stdio import stdio_server

from .app import init_options

__all__ = ["serve_stdio"]


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client until it closes stdin."""
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, init_options(server))
