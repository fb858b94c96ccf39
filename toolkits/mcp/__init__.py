"""MCP servers as toolkit nodes: config, naming, one owned session per server, and groups.

configs = load_mcp_servers(Path("claude_desktop_config.json"))
async with McpToolkitGroup(configs) as group:
    tools = await group["time"].list_tools()
    result = await group["time"].call_tool("time__get_current_time", {"timezone": "UTC"})
    prompts = await group["time"].catalog.list_prompts()   # resources, prompts, completions
    unsubscribe = await group["files"].subscribe_resource(uri, on_updated)   # resource updates

Requests a server sends its client during a call (sampling, elicitation, roots) go to whoever
made the call: wrap calls in `answering(handler)`; its log messages during a call go to
`on_server_log(handler)` blocks the same way; see `server_requests`.
"""

from .catalog import McpCatalog
from .config import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_TIMEOUT,
    McpServerConfig,
    PrefixPolicy,
    ProtocolMode,
    TransportKind,
    load_mcp_servers,
)
from .group import McpToolkitGroup
from .health import HealthState, NodeHealth
from .naming import NodeTools, is_offered, resolve_tool_names, sanitize_name
from .node import ListChangedCallback, McpToolkit, ToolsChangedCallback
from .server_requests import ServerLogHandler, ServerRequestHandler, answering, on_server_log
from .session import Backoff, Target
from .subscriptions import ResourceUpdatedCallback, Unsubscribe
from .transport import TransportFactory

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIMEOUT",
    "Backoff",
    "HealthState",
    "ListChangedCallback",
    "McpCatalog",
    "McpServerConfig",
    "McpToolkit",
    "McpToolkitGroup",
    "NodeHealth",
    "NodeTools",
    "PrefixPolicy",
    "ProtocolMode",
    "ResourceUpdatedCallback",
    "ServerLogHandler",
    "ServerRequestHandler",
    "Target",
    "ToolsChangedCallback",
    "TransportFactory",
    "TransportKind",
    "Unsubscribe",
    "answering",
    "is_offered",
    "load_mcp_servers",
    "on_server_log",
    "resolve_tool_names",
    "sanitize_name",
]
