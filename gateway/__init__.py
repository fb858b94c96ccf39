"""The gateway: runs agents on tool nodes, traces them, and serves them."""

from .engine import AgentSpec, Gateway
from .errors import (
    ConfigError,
    DepthExceeded,
    GatewayError,
    RunCancelled,
    RunPaused,
    StoreError,
    StoreUnavailable,
    ToolConflict,
    UnknownAgent,
    UnknownRun,
    UnknownTool,
)
from .run_state import Checkpoint, RunOrigin, RunResult, RunState
from .store import FileRunStore, RunStore
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
    "Checkpoint",
    "ConfigError",
    "DepthExceeded",
    "FileRunStore",
    "Gateway",
    "GatewayError",
    "JsonLinesPrinter",
    "RunCancelled",
    "RunOrigin",
    "RunPaused",
    "RunResult",
    "RunState",
    "RunStore",
    "Span",
    "StoreError",
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
]
