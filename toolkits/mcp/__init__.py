"""MCP servers as toolkit nodes: config, naming, one owned session per server, and groups.

configs = load_mcp_servers(Path("claude_desktop_config.json"))
async with McpToolkitGroup(configs) as group:
    tools = await group["time"].list_tools()
    result = await group["time"].call_tool("time__get_current_time", {"timezone": "UTC"})
"""

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
from .node import McpToolkit, ToolsChangedCallback
from .session import Backoff, Target
from .transport import TransportFactory

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_TIMEOUT",
    "Backoff",
    "HealthState",
    "McpServerConfig",
    "McpToolkit",
    "McpToolkitGroup",
    "NodeHealth",
    "NodeTools",
    "PrefixPolicy",
    "ProtocolMode",
    "Target",
    "ToolsChangedCallback",
    "TransportFactory",
    "TransportKind",
    "is_offered",
    "load_mcp_servers",
    "resolve_tool_names",
    "sanitize_name",
]
