"""A server of many tools with realistic schemas (~700 bytes each as JSON), for listings larger
than a transport's limits: `many_tools(count)` in-process, or over stdio as
`python tests/servers/wide.py COUNT`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server

from tests.servers.inprocess import Context, ToyServer, text_result

__all__ = ["many_tools"]


def _schema(number: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "record_id": {
                "type": "string",
                "description": f"The record's id, e.g. 'rec_{number}'.",
            },
            "query": {"type": "string", "description": "Free-text filter; field:value terms."},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 50},
            "fields": {
                "type": "object",
                "description": "The fields to set.",
                "properties": {
                    "name": {"type": "string", "maxLength": 200},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "status": {"type": "string", "enum": ["draft", "active", "closed"]},
                },
                "required": ["name"],
            },
        },
        "required": ["record_id"],
    }


def many_tools(count: int) -> ToyServer:
    """A server named `wide` with tools `tool_0000`, `tool_0001`, ... (each answers "done")."""
    toy = ToyServer("wide")

    async def done(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        return text_result("done")

    for number in range(count):
        description = f"Tool {number} of the wide server: reads and changes its records."
        toy.add(f"tool_{number:04}", done, description=description, schema=_schema(number))
    return toy


async def _serve(count: int) -> None:
    server = many_tools(count).server
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(_serve, int(sys.argv[1]))
