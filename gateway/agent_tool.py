"""An agent as a tool: how it is described and what it takes, to another agent and to an MCP
client alike.

Another agent asks it with a `prompt`. An MCP client may also continue a conversation
(`session_id`) or send many questions in one call (`items`, answered in the agent's batches).
"""

from __future__ import annotations

from typing import Any

__all__ = ["AGENT_INPUT_SCHEMA", "SERVED_INPUT_SCHEMA", "agent_description"]

_PROMPT: dict[str, Any] = {"type": "string", "description": "The question or task for the agent."}

AGENT_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"prompt": _PROMPT},
    "required": ["prompt"],
}
"""What an agent calling an agent sends."""

SERVED_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prompt": _PROMPT,
        "session_id": {
            "type": "string",
            "description": "Continue the conversation kept under this id (chat memory).",
        },
        "items": {
            "type": "array",
            "description": "Instead of `prompt`: many questions in one run, each answered "
            "on its own (in the agent's batches).",
            "items": {
                "type": "object",
                "properties": {"prompt": {"type": "string"}, "session_id": {"type": "string"}},
                "required": ["prompt"],
                "additionalProperties": False,
            },
            "minItems": 1,
        },
    },
    "additionalProperties": False,
}
"""What an MCP client calling a served agent sends: a `prompt` or `items`."""


def agent_description(name: str, description: str) -> str:
    """The agent's own description, else one that says what it is."""
    return description or f"Ask the agent {name!r}."
