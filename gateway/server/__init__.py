"""The gateway served over MCP: agents as tools (and, in proxy mode, what the nodes offer:
their tools, and the MCP servers' resources, prompts, completions, client requests and changes).

build_server(gateway, settings)  -> the SDK's low-level Server (both protocol eras)
serve_stdio(server)              -> stdin/stdout, what Claude Desktop launches
serve_pipes(server, r, w)        -> the same on other pipes or a socket
serve_http(server, options)      -> streamable HTTP at /mcp, tokens and Host/Origin checks,
                                    and the agents to OpenAI clients at /v1 (`openai_api`)

Where things are: `server` (what the server is made of) and `serving` (one serving run's
state); `transports/` (stdio, HTTP and its checks, auth); `served/` (agents, proxied tools,
prompts, resources, subscriptions); `openai_api` and `openai_wire` (the agents as an
OpenAI-compatible Chat Completions API); `client_requests/` (asking our client, across rounds for
2026-07-28 clients); `notifications/` (progress, log messages, list changes). One proxied tool
call reads top to bottom in `served/proxied_tools.py` and `client_requests/ask_client.py`; one
passed straight through in `served/passing.py`.
"""

from .notifications.run_progress import McpNotifier
from .served.agents import AgentTools, run_result
from .served.proxied_prompts import ProxiedPrompts
from .served.proxied_resources import ProxiedResources
from .served.proxied_tools import ProxiedTools
from .server import SERVER_NAME, ToolRouter, ToolSource, build_server
from .transports.http import HttpOptions, http_app, http_options, serve_http
from .transports.stdio import serve_pipes, serve_stdio

__all__ = [
    "SERVER_NAME",
    "AgentTools",
    "HttpOptions",
    "McpNotifier",
    "ProxiedPrompts",
    "ProxiedResources",
    "ProxiedTools",
    "ToolRouter",
    "ToolSource",
    "build_server",
    "http_app",
    "http_options",
    "run_result",
    "serve_http",
    "serve_pipes",
    "serve_stdio",
]
