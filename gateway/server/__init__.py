"""The gateway served over MCP: agents as tools (and, in proxy mode, what the nodes offer:
their tools, and the MCP servers' resources, prompts, completions, client requests and changes).

build_server(gateway, settings)  -> the SDK's low-level Server (both protocol eras)
serve_stdio(server)              -> stdin/stdout, what Claude Desktop launches
serve_http(server, options)      -> streamable HTTP at /mcp, tokens and Host/Origin checks
"""

from .agent_tools import AgentTools, run_result
from .app import SERVER_NAME, ToolRouter, ToolSource, build_server
from .http import HttpOptions, http_app, http_options, serve_http
from .progress import McpNotifier
from .prompts import ProxiedPrompts
from .proxy import ProxiedTools
from .resources import ProxiedResources
from .stdio import serve_stdio

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
    "serve_stdio",
]
