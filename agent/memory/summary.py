"""Summarising the turns that fell out of a window, with the agent's own model.

One summary is one model call of bounded size (`SUMMARY_INPUT_TOKENS`, or less to fit the
model's window): a transcript too long for it keeps its newest part, and says so.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..context_window import CHARS_PER_TOKEN, estimate_tokens
from ..messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
)
from ..model import ChatModel

__all__ = [
    "SUMMARY_INPUT_TOKENS",
    "SUMMARY_INSTRUCTIONS",
    "summarise",
    "transcript",
    "unread",
]

SUMMARY_INSTRUCTIONS = (
    "You keep the memory of a conversation between a user and an assistant that uses tools. "
    "Write a concise summary of it that lets the assistant carry on: the user's goals, facts "
    "and numbers learned (from tools too), decisions, and open questions. Plain text, no "
    "preamble."
)
SUMMARY_INPUT_TOKENS = 16_000
"""The most one summary call sends (instructions, the summary so far and the transcript), as
`agent.context_window` estimates: about 64,000 characters. A provider's window is often not
known, and a session with a long unsummarised past (summaries switched on late) would
otherwise be sent whole: megabytes, refused or billed, on every turn."""
CUT_NOTE = "[the start of this part is left out: too long to summarise at once]"
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
    model: ChatModel,
    previous: str | None,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int = SUMMARY_INPUT_TOKENS,
) -> tuple[str, Usage]:
    """A new summary of `previous` and `messages`, and what the model spent on it.

    The request stays within `max_tokens` (as `agent.context_window` estimates): a transcript
    that does not fit keeps its newest lines, after a note that the start is left out
    (`unread` says of which messages). Raises `agent.errors.ModelError` when the model fails.
    """
    system, head, room = _request(previous, max_tokens)
    text = _newest_part(transcript(messages), room)
    answer = await model.invoke([system, UserMessage(content=head + text)], [])
    return answer.content.strip(), answer.usage


def unread(
    previous: str | None,
    messages: Sequence[ChatMessage],
    *,
    max_tokens: int = SUMMARY_INPUT_TOKENS,
) -> int:
    """How many of `messages`, oldest first, `summarise` with these arguments does not read
    whole: those its cut to fit `max_tokens` leaves out, in whole or in part (0: none)."""
    text = transcript(messages)
    part = _newest_part(text, _request(previous, max_tokens)[2])
    if part == text:
        return 0
    kept = len(part) - len(CUT_NOTE) - 1
    length = -1  # the lines of the messages from n on, joined: no newline before the first
    for n in range(len(messages) - 1, -1, -1):
        said = transcript([messages[n]])
        if said:
            length += len(said) + 1
        if length > kept:
            return n + 1
    return 0


def _request(previous: str | None, max_tokens: int) -> tuple[SystemMessage, str, int]:
    """A summary request's system message and head, and the room (in characters) its
    transcript has within `max_tokens`."""
    head = f"The summary so far:\n{previous}\n\n" if previous else ""
    head += "The conversation since:\n"
    system = SystemMessage(content=SUMMARY_INSTRUCTIONS)
    fixed = estimate_tokens([system, UserMessage(content=head)], [])[0]
    return system, head, (max_tokens - fixed - 1) * CHARS_PER_TOKEN


def _newest_part(text: str, room: int) -> str:
    """`text` if it has at most `room` characters, else its end (from a line's start where
    one is near) after `CUT_NOTE`."""
    if len(text) <= room:
        return text
    kept = text[len(text) - max(0, room - len(CUT_NOTE) - 1) :]
    line = kept.find("\n")
    if 0 <= line < len(kept) // 2:  # start at a whole line, unless that loses too much
        kept = kept[line + 1 :]
    return f"{CUT_NOTE}\n{kept}"
