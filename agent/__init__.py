"""The Tools Agent: a pure, resumable step over a chat model. Knows nothing of MCP."""

from .context_window import ReportsContextWindow, estimate_tokens
from .errors import (
    AgentError,
    ContextWindowExceeded,
    MemoryStoreError,
    MissingApiKey,
    ModelError,
    ModelHTTPError,
    ScriptExhausted,
    StateError,
    StepInterrupted,
)
from .memory import ChatMemory, History, InProcessStore, SessionMemory, SessionStore
from .messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from .model import ChatModel, TokenCallback
from .output import FINAL_RESULT_TOOL, OutputInvalid, OutputSchema
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
from .tools_agent import DEFAULT_SYSTEM_MESSAGE, AgentOptions, ToolsAgent

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
    "AssistantMessage",
    "ChatMemory",
    "ChatMessage",
    "ChatModel",
    "ContextWindowExceeded",
    "EngineRequest",
    "EngineResponse",
    "History",
    "InProcessStore",
    "ItemResult",
    "MemoryStoreError",
    "MissingApiKey",
    "ModelError",
    "ModelHTTPError",
    "OutputInvalid",
    "OutputSchema",
    "ReportsContextWindow",
    "ScriptExhausted",
    "ScriptedAnswer",
    "ScriptedCall",
    "ScriptedModel",
    "SessionMemory",
    "SessionStore",
    "StateError",
    "StepInterrupted",
    "SystemMessage",
    "TokenCallback",
    "ToolCall",
    "ToolCallStep",
    "ToolDefinition",
    "ToolMessage",
    "ToolsAgent",
    "Usage",
    "UserMessage",
    "estimate_tokens",
]
