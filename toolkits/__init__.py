"""Where tools come from: MCP servers and local Python functions, as named nodes.

Its names are imported at their first use (PEP 562): `toolkits.printable` or
`toolkits.errors` alone loads neither the MCP SDK nor the other nodes.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .background import in_background
    from .base import (
        CallContext,
        CallInfo,
        ElicitationCompleteHandler,
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
        CallRules,
        Catalog,
        FollowsChanges,
        HasCallRules,
        HasCatalog,
        HasHealth,
        HasIdleTimeout,
        HasOutputCap,
        HasResourceSubscriptions,
        HasSamplingCap,
        HasServerLogs,
        KnowsRenames,
        ListChangedCallback,
        ListsAtHand,
        ResourceUpdatedCallback,
        ServerLogCallback,
        SetsServerLogLevel,
        Unsubscribe,
    )
    from .errors import (
        AuthorizationRequired,
        AuthorizationServerFailed,
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
    "AuthorizationServerFailed",
    "Backoff",
    "CallContext",
    "CallInfo",
    "CallRules",
    "Catalog",
    "ConnectionLost",
    "ElicitationCompleteHandler",
    "FollowsChanges",
    "FunctionTool",
    "FunctionToolkit",
    "HasCallRules",
    "HasCatalog",
    "HasHealth",
    "HasIdleTimeout",
    "HasOutputCap",
    "HasResourceSubscriptions",
    "HasSamplingCap",
    "HasServerLogs",
    "HealthState",
    "KnowsRenames",
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
    "SetsServerLogLevel",
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

_WHERE = {
    "AsksCaller": ".capabilities",
    "AuthorizationRequired": ".errors",
    "AuthorizationServerFailed": ".errors",
    "Backoff": ".mcp",
    "CallContext": ".base",
    "CallInfo": ".base",
    "CallRules": ".capabilities",
    "Catalog": ".capabilities",
    "ConnectionLost": ".errors",
    "ElicitationCompleteHandler": ".base",
    "FollowsChanges": ".capabilities",
    "FunctionTool": ".function",
    "FunctionToolkit": ".function",
    "HasCallRules": ".capabilities",
    "HasCatalog": ".capabilities",
    "HasHealth": ".capabilities",
    "HasIdleTimeout": ".capabilities",
    "HasOutputCap": ".capabilities",
    "HasResourceSubscriptions": ".capabilities",
    "HasSamplingCap": ".capabilities",
    "HasServerLogs": ".capabilities",
    "HealthState": ".health",
    "KnowsRenames": ".capabilities",
    "ListChangedCallback": ".capabilities",
    "ListsAtHand": ".capabilities",
    "McpServerConfig": ".mcp",
    "McpToolkit": ".mcp",
    "McpToolkitGroup": ".mcp",
    "NoSuchTool": ".errors",
    "NodeHealth": ".health",
    "NodeStopped": ".errors",
    "NotOffered": ".errors",
    "ProgressCallback": ".base",
    "ResourceUpdatedCallback": ".capabilities",
    "ServerConfigError": ".errors",
    "ServerLogCallback": ".capabilities",
    "SetsServerLogLevel": ".capabilities",
    "ServerLogHandler": ".base",
    "ServerRequestHandler": ".base",
    "ServerUnavailable": ".errors",
    "Tool": ".base",
    "ToolTimeout": ".errors",
    "Toolkit": ".base",
    "ToolkitError": ".errors",
    "Unsubscribe": ".capabilities",
    "calculator": ".calculator",
    "error_result": ".base",
    "function_tool": ".function",
    "in_background": ".background",
    "json_bytes": ".json_bytes",
    "load_mcp_servers": ".mcp",
    "observed_text": ".observation",
    "printable": ".printable",
    "read_json": ".json_bytes",
    "result_data": ".observation",
    "result_media": ".observation",
    "result_text": ".observation",
    "validation_brief": ".base",
}
"""The module each name of `__all__` comes from."""


def __getattr__(name: str) -> Any:
    """A name of `__all__`, or a submodule (`toolkits.mcp`), imported at its first use."""
    module = _WHERE.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # found directly from now on
        return value
    if not name.startswith("_"):
        try:
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__name__}.{name}":
                raise  # a submodule that is there, missing what it imports
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """Keeps `calculator`, `json_bytes` and `printable` the functions they name: importing
    a submodule of that name (as our own modules do) sets the package's attribute to the
    module, and `__getattr__` would never be asked again (`from toolkits import json_bytes`
    would give the module)."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _NAMESAKES and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


_NAMESAKES = frozenset({"calculator", "json_bytes", "printable"})
sys.modules[__name__].__class__ = _Package
