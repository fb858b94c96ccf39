"""MCP servers as toolkit nodes: config, naming, one owned session per server, and groups.

configs = load_mcp_servers(Path("claude_desktop_config.json"))
async with McpToolkitGroup(configs) as group:
    tools = await group["time"].list_tools()
    result = await group["time"].call_tool("time__get_current_time", {"timezone": "UTC"})
    prompts = await group["time"].catalog.list_prompts()   # resources, prompts, completions
    unsubscribe = await group["files"].subscribe_resource(uri, on_updated)   # resource updates

Requests a server sends its client during a call (sampling, elicitation, roots) go to whoever
made the call, and so do its log messages during the call: pass
`context=CallContext(answer=..., on_log=...)` (`toolkits.CallContext`); see `server_requests`.

HTTP servers that answer 401 get the MCP authorization flow (`oauth`): tokens live in the
user's keyring or a private file (`oauth_store`); `authorization` logs in, out and reports.
"""

from .backoff import Backoff
from .call_failures import too_deep_text
from .catalog import McpCatalog
from .config import (
    DEFAULT_MAX_OUTPUT,
    DEFAULT_MAX_SAMPLING,
    DEFAULT_TIMEOUT,
    McpServerConfig,
    PrefixPolicy,
    ProtocolMode,
    TokenEndpointAuth,
    TransportKind,
    load_mcp_servers,
)
from .error_text import ProtocolErrorResult, protocol_error, protocol_error_result
from .forward import Forward, readable_result
from .group import McpToolkitGroup
from .naming import NodeTools, is_offered, resolve_tool_names, sanitize_name
from .node import McpToolkit
from .oauth import McpOAuth, RedirectMode, oauth_for, uses_oauth
from .oauth_store import FileStore, KeyringStore, TokenStore, default_store
from .plain_result import is_plain_text, plain_for_era
from .session import Target
from .transport import TransportFactory

__all__ = [
    "DEFAULT_MAX_OUTPUT",
    "DEFAULT_MAX_SAMPLING",
    "DEFAULT_TIMEOUT",
    "Backoff",
    "FileStore",
    "Forward",
    "KeyringStore",
    "McpCatalog",
    "McpOAuth",
    "McpServerConfig",
    "McpToolkit",
    "McpToolkitGroup",
    "NodeTools",
    "PrefixPolicy",
    "ProtocolErrorResult",
    "ProtocolMode",
    "RedirectMode",
    "Target",
    "TokenEndpointAuth",
    "TokenStore",
    "TransportFactory",
    "TransportKind",
    "default_store",
    "is_offered",
    "is_plain_text",
    "load_mcp_servers",
    "oauth_for",
    "plain_for_era",
    "protocol_error",
    "protocol_error_result",
    "readable_result",
    "resolve_tool_names",
    "sanitize_name",
    "too_deep_text",
    "uses_oauth",
]
