"""Where tools come from: MCP servers and local Python functions, as named nodes."""

from .background import in_background
from .base import ROUTING_KEY, ProgressCallback, Tool, Toolkit, error_result, split_routed_input
from .calculator import calculator
from .errors import (
    AuthorizationRequired,
    ConnectionLost,
    NotOffered,
    ServerUnavailable,
    ToolkitError,
    ToolTimeout,
    UnknownTool,
)
from .function import FunctionTool, FunctionToolkit, function_tool
from .mcp import McpServerConfig, McpToolkit, McpToolkitGroup, NodeHealth, load_mcp_servers
from .observation import result_data, result_text

__all__ = [
    "ROUTING_KEY",
    "AuthorizationRequired",
    "ConnectionLost",
    "FunctionTool",
    "FunctionToolkit",
    "McpServerConfig",
    "McpToolkit",
    "McpToolkitGroup",
    "NodeHealth",
    "NotOffered",
    "ProgressCallback",
    "ServerUnavailable",
    "Tool",
    "ToolTimeout",
    "Toolkit",
    "ToolkitError",
    "UnknownTool",
    "calculator",
    "error_result",
    "function_tool",
    "in_background",
    "load_mcp_servers",
    "result_data",
    "result_text",
    "split_routed_input",
]
