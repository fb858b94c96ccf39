"""Summarising the turns that fell out of a window, with the agent's own model."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..model import ChatModel

__all__ = ["SUMMARY_INSTRUCTIONS", "summarise", "transcript"]

SUMMARY_INSTRUCTIONS = (
    "You keep the memory of a conversation between a user and an assistant that uses tools. "
    "Write a concise summary of it that lets the assistant carry on: the user's goals, facts "
    "and numbers learned (from tools too), decisions, and open questions. Plain text, no "
    "preamble."
)
MAX_RESULT_CHARS = 2000
"""Of a tool result, what the summariser reads: results can be huge; their gist is at the top."""


def transcript(messages: Sequence[ChatMessage]) -> str:
    """The conversation as plain text a model can read without knowing our message types."""
    lines: list[str] = []
    for message in messages:
        if isinstance(message, UserMessage):
            lines.append(f"User: {message.content}")
        elif isinstance(message, AssistantMessage):
            if message.content:
                lines.append(f"Assistant: {message.content}")
            for call in message.tool_calls:
                arguments = call.invalid_arguments or json.dumps(call.arguments)
                lines.append(f"Assistant called {call.name} with {arguments}")
        elif isinstance(message, ToolMessage):
            result = message.content
            if len(result) > MAX_RESULT_CHARS:
                result = result[:MAX_RESULT_CHARS] + " [...]"
            lines.append(f"{message.name} returned: {result}")
        else:
            lines.append(f"System: {message.content}")
    return "\n".join(lines)


async def summarise(
    model: ChatModel, previous: str | None, messages: Sequence[ChatMessage]
) -> tuple[str, Usage]:
    """A new summary of `previous` and `messages`, and what the model spent on it.

    Raises `agent.errors.ModelError` when the model fails.
    """
    parts: list[str] = []
    if previous:
        parts.append(f"The summary so far:\n{previous}\n")
    parts.append(f"The conversation since:\n{transcript(messages)}")
    answer = await model.invoke(
        [SystemMessage(content=SUMMARY_INSTRUCTIONS), UserMessage(content="\n".join(parts))], []
    )
    return answer.content.strip(), answer.usage
