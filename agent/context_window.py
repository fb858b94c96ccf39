"""Whether a model call fits the model's context window, estimated before it is sent.

Counting exactly needs each provider's tokenizer. The estimate counts the characters a call
carries (message texts, tool calls and their arguments, each tool's name, description and
JSON schema) at four per token, the usual rule of thumb for English text and JSON, plus a few
tokens of framing per message and per tool, and `MEDIA_TOKENS` per image or audio clip. It is meant to catch a request that clearly
cannot fit (dozens of tool schemas, a long conversation) with a clear error before the
provider answers 400, not to fill a window to its last token: real counts differ by tens of
percent either way.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .errors import ContextWindowExceeded
from .messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)

__all__ = [
    "CHARS_PER_TOKEN",
    "MEDIA_TOKENS",
    "FittedHistory",
    "ReportsContextWindow",
    "check_context_window",
    "estimate_tokens",
    "fit_history",
]

CHARS_PER_TOKEN = 4
MESSAGE_FRAMING = 4
"""Tokens a provider adds around each message (role, separators)."""
TOOL_FRAMING = 8
"""Tokens a provider adds around each tool definition."""
MEDIA_TOKENS = 1_600
"""Tokens an image (or audio clip) in a tool's result is counted as: about what Anthropic
charges for the largest image it reads whole (1.15 megapixels)."""


@runtime_checkable
class ReportsContextWindow(Protocol):
    """A model that can tell its context window (from its provider, when it reports it)."""

    async def context_window(self) -> int | None:
        """Tokens the model's context holds, or None when unknown. Never raises."""
        ...


def estimate_tokens(
    messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition]
) -> tuple[int, int]:
    """Estimated tokens of the conversation and of the tools' definitions."""
    chars = media = 0
    for message in messages:
        chars += len(message.content)
        if isinstance(message, ToolMessage):
            media += len(message.media)
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                chars += len(call.name) + len(call.invalid_arguments or _json(call.arguments))
    conversation = (
        math.ceil(chars / CHARS_PER_TOKEN) + MESSAGE_FRAMING * len(messages) + MEDIA_TOKENS * media
    )
    tool_chars = sum(
        len(tool.name) + len(tool.description) + len(_json(tool.input_schema)) for tool in tools
    )
    return conversation, math.ceil(tool_chars / CHARS_PER_TOKEN) + TOOL_FRAMING * len(tools)


def check_context_window(
    messages: Sequence[ChatMessage], tools: Sequence[ToolDefinition], window: int, model: str
) -> None:
    """Raises `ContextWindowExceeded` when the call would clearly not fit `window` tokens."""
    conversation, schemas = estimate_tokens(messages, tools)
    if conversation + schemas <= window:
        return
    raise ContextWindowExceeded(
        f"{model}: the request would not fit the model's context window of {window} tokens: "
        f"about {conversation + schemas} tokens ({len(tools)} tool definitions ~{schemas}, "
        f"{len(messages)} messages ~{conversation}; estimated at {CHARS_PER_TOKEN} characters "
        "per token). Give the agent fewer tools (a server's `include`/`exclude`), a shorter "
        "prompt or fewer iterations, or a model with a larger context (`context_window`)."
    )


@dataclass(frozen=True, slots=True)
class FittedHistory:
    """A session history cut to fit a call: what is kept, and what was left out."""

    messages: list[ChatMessage]
    turns_left_out: int
    summary_left_out: bool
    turns: int
    """Turns the history had."""


def fit_history(
    history: Sequence[ChatMessage],
    others: Sequence[ChatMessage],
    tools: Sequence[ToolDefinition],
    window: int,
) -> FittedHistory:
    """The part of `history` (a summary as leading system messages, then whole turns, each
    from its question on) that fits `window` next to the call's `others` (system message,
    question, scratchpad) and `tools`, as `check_context_window` counts.

    The memory's own rule decides what goes first: the summary is kept while it fits, then
    the newest turns, whole; the oldest are left out. Each part is estimated on its own, which
    counts a little more than the whole, so what is kept always fits.
    """
    summary: list[ChatMessage] = []
    rest = list(history)
    while rest and isinstance(rest[0], SystemMessage):
        summary.append(rest.pop(0))
    turns: list[list[ChatMessage]] = []
    for message in rest:
        if isinstance(message, UserMessage) or not turns:
            turns.append([])
        turns[-1].append(message)
    conversation, schemas = estimate_tokens(others, tools)
    room = window - conversation - schemas
    summary_tokens = estimate_tokens(summary, ())[0]
    keep_summary = summary_tokens <= room
    if keep_summary:
        room -= summary_tokens
    kept: list[list[ChatMessage]] = []
    for turn in reversed(turns):
        tokens = estimate_tokens(turn, ())[0]
        if tokens > room:
            break
        kept.append(turn)
        room -= tokens
    return FittedHistory(
        messages=[*(summary if keep_summary else ()), *(m for t in reversed(kept) for m in t)],
        turns_left_out=len(turns) - len(kept),
        summary_left_out=bool(summary) and not keep_summary,
        turns=len(turns),
    )


def _json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
