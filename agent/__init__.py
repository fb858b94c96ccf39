"""The Tools Agent: a pure, resumable step over a chat model. Knows nothing of MCP.

Its names are imported at their first use (PEP 562): `agent.errors` alone loads neither
the models (httpx) nor the memory stores.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .agent_options import DEFAULT_SYSTEM_MESSAGE, AgentOptions
    from .context_window import ReportsContextWindow, estimate_tokens
    from .errors import (
        AgentError,
        AllModelsFailed,
        ContextWindowExceeded,
        MemoryDriverMissing,
        MemoryStoreError,
        MemoryWriteUnknown,
        MissingApiKey,
        ModelAuthError,
        ModelConfigError,
        ModelConnectionError,
        ModelError,
        ModelHTTPError,
        ModelResponseError,
        ModelTimeout,
        ScriptExhausted,
        StateError,
        StepInterrupted,
        StepPaused,
    )
    from .memory import (
        ChatMemory,
        History,
        InProcessStore,
        OnWait,
        SessionMemory,
        SessionStore,
        SQLiteStore,
        store_from_url,
    )
    from .messages import (
        AssistantMessage,
        ChatMessage,
        MediaPart,
        StopReason,
        SystemMessage,
        ToolCall,
        ToolDefinition,
        ToolMessage,
        Usage,
        UserMessage,
    )
    from .model import (
        ChatModel,
        HoldsOutputSchema,
        LimitsTools,
        ReportsServer,
        ServerAddress,
        TokenCallback,
    )
    from .output import FINAL_RESULT_TOOL, OutputInvalid, OutputSchema
    from .output_validator import AnswerInfo, ModelRetry, OutputValidator
    from .protocol import (
        ROUTING_KEY,
        Action,
        ActionResponse,
        AgentItem,
        AgentRequestMetadata,
        AgentResult,
        EngineRequest,
        EngineResponse,
        ItemResult,
        ToolCallStep,
    )
    from .scripted import ScriptedAnswer, ScriptedCall, ScriptedModel
    from .tools_agent import ToolsAgent, WarningCallback

__all__ = [
    "DEFAULT_SYSTEM_MESSAGE",
    "FINAL_RESULT_TOOL",
    "ROUTING_KEY",
    "Action",
    "ActionResponse",
    "AgentError",
    "AgentItem",
    "AgentOptions",
    "AgentRequestMetadata",
    "AgentResult",
    "AllModelsFailed",
    "AnswerInfo",
    "AssistantMessage",
    "ChatMemory",
    "ChatMessage",
    "ChatModel",
    "ContextWindowExceeded",
    "EngineRequest",
    "EngineResponse",
    "History",
    "HoldsOutputSchema",
    "InProcessStore",
    "ItemResult",
    "LimitsTools",
    "MediaPart",
    "MemoryDriverMissing",
    "MemoryStoreError",
    "MemoryWriteUnknown",
    "MissingApiKey",
    "ModelAuthError",
    "ModelConfigError",
    "ModelConnectionError",
    "ModelError",
    "ModelHTTPError",
    "ModelResponseError",
    "ModelRetry",
    "ModelTimeout",
    "OnWait",
    "OutputInvalid",
    "OutputSchema",
    "OutputValidator",
    "ReportsContextWindow",
    "ReportsServer",
    "SQLiteStore",
    "ScriptExhausted",
    "ScriptedAnswer",
    "ScriptedCall",
    "ScriptedModel",
    "ServerAddress",
    "SessionMemory",
    "SessionStore",
    "StateError",
    "StepInterrupted",
    "StepPaused",
    "StopReason",
    "SystemMessage",
    "TokenCallback",
    "ToolCall",
    "ToolCallStep",
    "ToolDefinition",
    "ToolMessage",
    "ToolsAgent",
    "Usage",
    "UserMessage",
    "WarningCallback",
    "estimate_tokens",
    "store_from_url",
]

_WHERE = {
    "DEFAULT_SYSTEM_MESSAGE": ".agent_options",
    "FINAL_RESULT_TOOL": ".output",
    "ROUTING_KEY": ".protocol",
    "Action": ".protocol",
    "ActionResponse": ".protocol",
    "AgentError": ".errors",
    "AgentItem": ".protocol",
    "AgentOptions": ".agent_options",
    "AgentRequestMetadata": ".protocol",
    "AgentResult": ".protocol",
    "AllModelsFailed": ".errors",
    "AnswerInfo": ".output_validator",
    "AssistantMessage": ".messages",
    "ChatMemory": ".memory",
    "ChatMessage": ".messages",
    "ChatModel": ".model",
    "ContextWindowExceeded": ".errors",
    "EngineRequest": ".protocol",
    "EngineResponse": ".protocol",
    "History": ".memory",
    "HoldsOutputSchema": ".model",
    "InProcessStore": ".memory",
    "ItemResult": ".protocol",
    "LimitsTools": ".model",
    "MediaPart": ".messages",
    "MemoryDriverMissing": ".errors",
    "MemoryStoreError": ".errors",
    "MemoryWriteUnknown": ".errors",
    "MissingApiKey": ".errors",
    "ModelAuthError": ".errors",
    "ModelConfigError": ".errors",
    "ModelConnectionError": ".errors",
    "ModelError": ".errors",
    "ModelHTTPError": ".errors",
    "ModelResponseError": ".errors",
    "ModelRetry": ".output_validator",
    "ModelTimeout": ".errors",
    "OnWait": ".memory",
    "OutputInvalid": ".output",
    "OutputSchema": ".output",
    "OutputValidator": ".output_validator",
    "ReportsContextWindow": ".context_window",
    "ReportsServer": ".model",
    "SQLiteStore": ".memory",
    "ScriptExhausted": ".errors",
    "ScriptedAnswer": ".scripted",
    "ScriptedCall": ".scripted",
    "ScriptedModel": ".scripted",
    "ServerAddress": ".model",
    "SessionMemory": ".memory",
    "SessionStore": ".memory",
    "StateError": ".errors",
    "StepInterrupted": ".errors",
    "StepPaused": ".errors",
    "StopReason": ".messages",
    "SystemMessage": ".messages",
    "TokenCallback": ".model",
    "ToolCall": ".messages",
    "ToolCallStep": ".protocol",
    "ToolDefinition": ".messages",
    "ToolMessage": ".messages",
    "ToolsAgent": ".tools_agent",
    "Usage": ".messages",
    "UserMessage": ".messages",
    "WarningCallback": ".tools_agent",
    "estimate_tokens": ".context_window",
    "store_from_url": ".memory",
}
"""The module each name of `__all__` comes from."""


def __getattr__(name: str) -> Any:
    """A name of `__all__`, or a submodule (`agent.memory`), imported at its first use."""
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
