"""`tests.durable_tools.logged` as an MCP server over stdio: `python tests/servers/logged_stdio.py`.

For runs whose tool call is in an MCP server when its gateway stops (the call is held there)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script

from mcp.server import MCPServer

from tests.durable_tools import logged

server = MCPServer("logged")
server.tool()(logged)

if __name__ == "__main__":
    server.run("stdio")
