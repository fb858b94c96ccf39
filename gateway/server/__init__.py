"""The gateway served over MCP: agents as tools (and, in proxy mode, the nodes' tools).

build_server(gateway, settings)  -> the SDK's low-level Server (both protocol eras)
serve_stdio(server)              -> stdin/stdout, what Claude Desktop launches
serve_http(server, options)      -> streamable HTTP at /mcp, tokens and Host/Origin checks
"""

from .agent_tools import AgentTools, run_result
from .app import SERVER_NAME, ToolRouter, ToolSource, build_server
from .http import HttpOptions, http_app, http_options, serve_http
from .progress import McpNotifier
from .proxy import ProxiedTools
from .stdio import serve_stdio

__all__ = [
    "SERVER_NAME",
    "AgentTools",
    "HttpOptions",
    "McpNotifier",
    "ProxiedTools",
    "ToolRouter",
    "ToolSource",
    "build_server",
    "http_app",
    "http_options",
    "run_result",
    "serve_http",
    "serve_stdio",
]
