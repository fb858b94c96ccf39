"""A turn's part in its session: the history it is asked with (summarising first what fell
out of the window) and the saving of the turn once it is answered."""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable, Sequence

from .errors import MemoryStoreError, MemoryWriteUnknown, ModelError
from .memory import ChatMemory, History, summarise
from .memory.summary import SUMMARY_INPUT_TOKENS, unread
from .messages import ChatMessage, Usage, UserMessage
from .model import ChatModel

__all__ = ["Warn", "save_turn", "session_history"]

Warn = Callable[[str], Awaitable[None]]
"""Tells the user of a problem the turn goes on past."""


async def session_history(
    memory: ChatMemory,
    session_id: str,
    model: ChatModel,
    *,
    window: int | None,
    warn: Warn,
    without: str | None = None,
) -> tuple[list[ChatMessage], Usage]:
    """The session's history, summarising first what fell out of its window (`model` writes
    the summary; `window` is the context window it is known to have, if any), without the
    turn saved under key `without` (the turn being asked, when its step is made again).

    The summary is an optimisation: when the model fails to write it, or the store to keep
    it, the turn goes on with the window alone (a warning says so) and the next turn asks
    again."""
    history = await memory.load(session_id, without=without)
    if not history.to_summarise:
        return list(history.messages), Usage()
    room = SUMMARY_INPUT_TOKENS
    if window is not None:  # half of it: the rest is for the summary it writes
        room = min(room, window // 2)
    try:
        text, usage = await summarise(
            model, history.previous_summary, history.to_summarise, max_tokens=room
        )
    except ModelError as exc:
        await warn(
            f"the summary of the session's older turns failed: {exc}. This turn goes "
            "on without them (the window only); the next turn asks for it again."
        )
        return list(history.messages), Usage()
    try:
        await memory.save_summary(session_id, history.through, text)
    except MemoryStoreError as exc:
        await warn(
            f"the summary of the session's older turns could not be kept: {exc}. This turn "
            "goes on without them (the window only); the next turn asks for it again."
        )
        return list(history.messages), usage
    skipped = _left_out(history, room)
    if skipped:
        await warn(
            f"turns {skipped.start}-{skipped.stop - 1} of the session fell out of its "
            "window unsummarised and were too many to summarise at once: the summary "
            f"covers the turns after them (through turn {history.through}); they stay "
            "stored (`sessions show`)."
        )
    return list((await memory.load(session_id, without=without)).messages), usage


def _left_out(history: History, room: int) -> range:
    """The turns the new summary does not read whole: those `load` left out (`left_out`),
    and those of `to_summarise` that its request, cut to fit `room`, leaves out in part."""
    messages = history.to_summarise
    turns = sum(isinstance(m, UserMessage) for m in messages)
    first = history.through - turns + 1  # the first turn of `to_summarise`
    cut = unread(history.previous_summary, messages, max_tokens=room)
    cut_turns = sum(isinstance(m, UserMessage) for m in messages[:cut])
    start = history.left_out.start if history.left_out else first
    return range(start, first + cut_turns)


async def save_turn(
    memory: ChatMemory, session_id: str, key: str, messages: Sequence[ChatMessage]
) -> None:
    """Keep a finished turn under `key`. Raises `MemoryStoreError` saying that the session
    keeps neither its question nor its answer, or `MemoryWriteUnknown` saying that it may."""
    try:
        try:
            await memory.save(session_id, key, messages)
        except MemoryWriteUnknown:
            # The store may apply that write yet: the same key again is stored once either
            # way, and an answer to it tells that the turn is kept.
            await memory.save(session_id, key, messages)
    except MemoryWriteUnknown as exc:
        raise MemoryWriteUnknown(
            f"{exc}; this turn may have been saved or not (the store may apply it once it "
            f"answers): `sessions show {shlex.quote(session_id)}` tells: look before asking again"
        ) from exc
    except MemoryStoreError as exc:  # the answer may have been shown as it streamed
        raise MemoryStoreError(
            f"{exc}; this turn was not saved: session {session_id!r} keeps neither "
            "its question nor its answer"
        ) from exc
