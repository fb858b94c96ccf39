"""The gateway: runs agents on tool nodes, traces them, and serves them.

Its names are imported at their first use (PEP 562): `import gateway`, as the command line
does for `--version` and `--help`, loads none of the library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .approval import ApprovalRequest, ApprovalRule, Approver, Decision
    from .assembly import open_gateway
    from .config import Config, load_config
    from .engine import AgentSpec, Gateway
    from .errors import (
        AlreadyDecided,
        ConfigError,
        DepthExceeded,
        GatewayError,
        PickledDecision,
        PickledRecord,
        RunCancelled,
        RunPaused,
        StoreError,
        StoreGone,
        StoreUnavailable,
        ToolConflict,
        UnknownAgent,
        UnknownRun,
        UnknownTool,
        UnreadableRun,
    )
    from .journal import Journal
    from .limits import PerNode
    from .run_state import Checkpoint, RunOrigin, RunResult, RunState
    from .store import FileRunStore, RunStore
    from .tool_definitions import tool_definition
    from .trace import (
        JsonLinesPrinter,
        Span,
        ToolProgress,
        TraceEvent,
        TraceHook,
        TracePrinter,
        Tracer,
    )

__all__ = [
    "AgentSpec",
    "AlreadyDecided",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "Checkpoint",
    "Config",
    "ConfigError",
    "Decision",
    "DepthExceeded",
    "FileRunStore",
    "Gateway",
    "GatewayError",
    "Journal",
    "JsonLinesPrinter",
    "PerNode",
    "PickledDecision",
    "PickledRecord",
    "RunCancelled",
    "RunOrigin",
    "RunPaused",
    "RunResult",
    "RunState",
    "RunStore",
    "Span",
    "StoreError",
    "StoreGone",
    "StoreUnavailable",
    "ToolConflict",
    "ToolProgress",
    "TraceEvent",
    "TraceHook",
    "TracePrinter",
    "Tracer",
    "UnknownAgent",
    "UnknownRun",
    "UnknownTool",
    "UnreadableRun",
    "load_config",
    "open_gateway",
    "tool_definition",
]

_WHERE = {
    "AgentSpec": ".engine",
    "AlreadyDecided": ".errors",
    "ApprovalRequest": ".approval",
    "ApprovalRule": ".approval",
    "Approver": ".approval",
    "Checkpoint": ".run_state",
    "Config": ".config",
    "ConfigError": ".errors",
    "Decision": ".approval",
    "DepthExceeded": ".errors",
    "FileRunStore": ".store",
    "Gateway": ".engine",
    "GatewayError": ".errors",
    "Journal": ".journal",
    "JsonLinesPrinter": ".trace",
    "PerNode": ".limits",
    "PickledDecision": ".errors",
    "PickledRecord": ".errors",
    "RunCancelled": ".errors",
    "RunOrigin": ".run_state",
    "RunPaused": ".errors",
    "RunResult": ".run_state",
    "RunState": ".run_state",
    "RunStore": ".store",
    "Span": ".trace",
    "StoreError": ".errors",
    "StoreGone": ".errors",
    "StoreUnavailable": ".errors",
    "ToolConflict": ".errors",
    "ToolProgress": ".trace",
    "TraceEvent": ".trace",
    "TraceHook": ".trace",
    "TracePrinter": ".trace",
    "Tracer": ".trace",
    "UnknownAgent": ".errors",
    "UnknownRun": ".errors",
    "UnknownTool": ".errors",
    "UnreadableRun": ".errors",
    "load_config": ".config",
    "open_gateway": ".assembly",
    "tool_definition": ".tool_definitions",
}
"""The module each name of `__all__` comes from."""


def __getattr__(name: str) -> Any:
    """A name of `__all__`, or a submodule (`gateway.config`), imported at its first use."""
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
