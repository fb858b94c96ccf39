"""An MCP server written the usual way: its tool asks its client during the call.

`ask(question)` samples the client's model (`ctx.session.create_message`) and then asks the
user for a name (`ctx.elicit`), both over the request's back-channel, as most servers do.
Run as a stdio server: `python -m tests.servers.asking`.
"""

from __future__ import annotations

import mcp_types as types
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import BaseModel

server = MCPServer("asking")


class Name(BaseModel):
    name: str


@server.tool()
async def ask(question: str, ctx: Context) -> str:
    """Ask the client's model, then the user."""
    # Deprecated by 2026-07-28 (SEP-2577), and still how servers are written today.
    sampled = await ctx.session.create_message(  # pyright: ignore[reportDeprecated]
        [types.SamplingMessage(role="user", content=types.TextContent(text=question))],
        max_tokens=20,
    )
    answer = sampled.content.text if isinstance(sampled.content, types.TextContent) else "?"
    elicited = await ctx.elicit("Your name?", Name)
    name = elicited.data.name if elicited.action == "accept" else elicited.action
    return f"model said {answer!r}; user is {name}"


if __name__ == "__main__":
    server.run("stdio")
