"""The gateway: runs agents on tool nodes, traces them, and serves them."""

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
from .step_loop import tool_definition
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
