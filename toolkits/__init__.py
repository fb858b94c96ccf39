"""Where tools come from: MCP servers and local Python functions, as named nodes."""

from .background import in_background
from .base import (
    CallContext,
    ProgressCallback,
    ServerLogHandler,
    ServerRequestHandler,
    Tool,
    Toolkit,
    error_result,
    validation_brief,
)
from .calculator import calculator
from .capabilities import (
    AsksCaller,
    Catalog,
    FollowsChanges,
    HasCatalog,
    HasHealth,
    HasOutputCap,
    HasResourceSubscriptions,
    HasServerLogs,
    ListChangedCallback,
    ListsAtHand,
    ResourceUpdatedCallback,
    ServerLogCallback,
    Unsubscribe,
)
from .errors import (
    AuthorizationRequired,
    ConnectionLost,
    NodeStopped,
    NoSuchTool,
    NotOffered,
    ServerConfigError,
    ServerUnavailable,
    ToolkitError,
    ToolTimeout,
)
from .function import FunctionTool, FunctionToolkit, function_tool
from .health import HealthState, NodeHealth
from .json_bytes import json_bytes, read_json
from .mcp import Backoff, McpServerConfig, McpToolkit, McpToolkitGroup, load_mcp_servers
from .observation import observed_text, result_data, result_media, result_text
from .printable import printable

__all__ = [
    "AsksCaller",
    "AuthorizationRequired",
    "Backoff",
    "CallContext",
    "Catalog",
    "ConnectionLost",
    "FollowsChanges",
    "FunctionTool",
    "FunctionToolkit",
    "HasCatalog",
    "HasHealth",
    "HasOutputCap",
    "HasResourceSubscriptions",
    "HasServerLogs",
    "HealthState",
    "ListChangedCallback",
    "ListsAtHand",
    "McpServerConfig",
    "McpToolkit",
    "McpToolkitGroup",
    "NoSuchTool",
    "NodeHealth",
    "NodeStopped",
    "NotOffered",
    "ProgressCallback",
    "ResourceUpdatedCallback",
    "ServerConfigError",
    "ServerLogCallback",
    "ServerLogHandler",
    "ServerRequestHandler",
    "ServerUnavailable",
    "Tool",
    "ToolTimeout",
    "Toolkit",
    "ToolkitError",
    "Unsubscribe",
    "calculator",
    "error_result",
    "function_tool",
    "in_background",
    "json_bytes",
    "load_mcp_servers",
    "observed_text",
    "printable",
    "read_json",
    "result_data",
    "result_media",
    "result_text",
    "validation_brief",
]
