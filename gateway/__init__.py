"""The gateway: runs agents on tool nodes, traces them, and serves them."""

from .engine import AgentSpec, Checkpoint, Gateway, RunResult, RunState
from .errors import (
    ConfigError,
    DepthExceeded,
    GatewayError,
    ToolConflict,
    UnknownAgent,
    UnknownTool,
)
from .trace import JsonLinesPrinter, Span, TraceEvent, TraceHook, TracePrinter, Tracer

__all__ = [
    "AgentSpec",
    "Checkpoint",
    "ConfigError",
    "DepthExceeded",
    "Gateway",
    "GatewayError",
    "JsonLinesPrinter",
    "RunResult",
    "RunState",
    "Span",
    "ToolConflict",
    "TraceEvent",
    "TraceHook",
    "TracePrinter",
    "Tracer",
    "UnknownAgent",
    "UnknownTool",
]
