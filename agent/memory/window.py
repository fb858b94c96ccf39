"""Which stored turns the model sees: windows by turns and by tokens, on turn boundaries.

A window is a run of the newest turns. It never splits a turn, so every tool call keeps its
result and nothing starts with an orphan tool message. Newest first, each turn goes in whole
if it fits the token budget; if it does not, its short form (the question and the final
answer, without the tool calls between) may; if that does not fit either, the window ends.

Tokens are what the provider reported where its usage tells (an answer's output tokens; the
growth of the input between two calls of a turn, which is the tool results in between), and
a cheap estimate (about 4 characters a token) for the rest.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import AssistantMessage, ChatMessage, SystemMessage, ToolMessage, UserMessage
from .base import StoredTurn

__all__ = [
    "Window",
    "count_tokens",
    "estimate_tokens",
    "for_history",
    "is_valid_history",
    "select_window",
]

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4
"""Tokens a message costs besides its text (role, separators), as chat templates spend them."""

THINKING_ACROSS_TURNS = frozenset({"anthropic", "gemini"})
"""Providers that read the thinking of every earlier, finished turn (Claude keeps thinking
blocks in context; Gemini's thought signatures help its reasoning). Others get it back only
from turns that called tools (see `for_history`)."""


def estimate_tokens(message: ChatMessage) -> int:
    text = message.content
    if isinstance(message, AssistantMessage):
        text += "".join(
            call.name + (call.invalid_arguments or json.dumps(call.arguments))
            for call in message.tool_calls
        )
    return MESSAGE_OVERHEAD + -(-len(text) // CHARS_PER_TOKEN)


def count_tokens(messages: Sequence[ChatMessage]) -> list[int]:
    """Tokens of each message of a turn: the provider's counts where known, else estimates."""
    counts = [estimate_tokens(m) for m in messages]
    answers = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
    for i in answers:
        message = messages[i]
        if isinstance(message, AssistantMessage) and message.usage.output_tokens > 0:
            counts[i] = message.usage.output_tokens
    for a, b in itertools.pairwise(answers):
        first, second = messages[a], messages[b]
        assert isinstance(first, AssistantMessage)
        assert isinstance(second, AssistantMessage)
        between = list(range(a + 1, b))
        if not between or not first.usage.input_tokens or not second.usage.input_tokens:
            continue
        grown = second.usage.input_tokens - first.usage.input_tokens - first.usage.output_tokens
        estimated = sum(counts[i] for i in between)
        if grown <= 0 or estimated <= 0:
            continue
        for i in between:  # the provider counted them together: share by their estimates
            counts[i] = max(1, round(grown * counts[i] / estimated))
    return counts


@dataclass(frozen=True, slots=True)
class Window:
    messages: list[ChatMessage]
    tokens: int
    dropped: list[StoredTurn]
    """The older turns left out, oldest first."""


def select_window(
    turns: Sequence[StoredTurn], *, max_turns: int | None, max_tokens: int | None
) -> Window:
    """The newest turns that fit both limits, oldest first (see the module docstring)."""
    kept: list[list[ChatMessage]] = []
    used = 0
    start = len(turns)
    for turn in reversed(turns):
        if max_turns is not None and len(kept) >= max_turns:
            break
        whole = sum(turn.tokens)
        if max_tokens is None or used + whole <= max_tokens:
            kept.append(list(turn.messages))
            used += whole
        else:
            short = _short_form(turn)
            if short is None or used + short[1] > max_tokens:
                break
            kept.append(short[0])
            used += short[1]
        start -= 1
    messages = [message for turn in reversed(kept) for message in turn]
    return Window(messages=messages, tokens=used, dropped=list(turns[:start]))


def for_history(messages: Sequence[ChatMessage]) -> list[ChatMessage]:
    """Stored turns (each from its question on) as earlier turns are sent: without thinking
    no provider reads.

    A turn that called tools keeps the thinking of all its answers, for every provider:
    DeepSeek's thinking mode answers 400 ("The reasoning_content in the thinking mode must be
    passed back to the API") to a later request without it, and OpenAI-style servers that do
    not need it were sent it within that turn already. A turn without tool calls keeps it only
    for `THINKING_ACROSS_TURNS`: DeepSeek ignores it there, and its older reasoner model
    rejects it.
    """
    kept: list[ChatMessage] = []
    turn: list[ChatMessage] = []

    def close_turn() -> None:
        called_tools = any(isinstance(m, AssistantMessage) and m.tool_calls for m in turn)
        kept.extend(turn if called_tools else map(_without_thinking, turn))
        turn.clear()

    for message in messages:
        if isinstance(message, UserMessage):
            close_turn()
        turn.append(message)
    close_turn()
    return kept


def _without_thinking(message: ChatMessage) -> ChatMessage:
    if (
        isinstance(message, AssistantMessage)
        and message.raw is not None
        and message.provider not in THINKING_ACROSS_TURNS
    ):
        return message.model_copy(update={"raw": None, "provider": None})
    return message


def _short_form(turn: StoredTurn) -> tuple[list[ChatMessage], int] | None:
    """The question and the final answer, if the turn has that shape."""
    messages = turn.messages
    if len(messages) < 2:
        return None
    question, answer = messages[0], messages[-1]
    if not isinstance(question, UserMessage) or not isinstance(answer, AssistantMessage):
        return None
    if answer.tool_calls:
        return None
    return [question, answer], turn.tokens[0] + turn.tokens[-1]


def is_valid_history(messages: Sequence[ChatMessage]) -> bool:
    """Whether a history can be sent as is: it starts with a question (after any system
    messages), and every tool call is answered right after its message, every result belongs
    to such a call."""
    rest = list(messages)
    while rest and isinstance(rest[0], SystemMessage):
        rest.pop(0)
    if rest and not isinstance(rest[0], UserMessage):
        return False
    open_calls: set[str] = set()
    for message in rest:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AssistantMessage):
            open_calls = {call.id for call in message.tool_calls}
    return not open_calls
