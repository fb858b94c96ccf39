"""Chat memory: conversation history across runs, keyed by session id."""

from __future__ import annotations

from collections import deque
from typing import Protocol, runtime_checkable

import anyio

from .messages import AssistantMessage, ChatMessage, UserMessage

__all__ = ["ChatMemory", "WindowMemory"]


@runtime_checkable
class ChatMemory(Protocol):
    async def load(self, session_id: str) -> list[ChatMessage]:
        """The history to put between the system message and the new question."""
        ...

    async def save(self, session_id: str, question: str, answer: str) -> None:
        """Record one finished turn."""
        ...


class WindowMemory:
    """Keeps the last `turns` question/answer pairs of each session, in process memory."""

    def __init__(self, turns: int = 10) -> None:
        if turns < 1:
            raise ValueError("WindowMemory needs turns >= 1")
        self._turns = turns
        self._sessions: dict[str, deque[tuple[str, str]]] = {}
        self._lock = anyio.Lock()

    async def load(self, session_id: str) -> list[ChatMessage]:
        async with self._lock:
            pairs = list(self._sessions.get(session_id, ()))
        history: list[ChatMessage] = []
        for question, answer in pairs:
            history += [UserMessage(content=question), AssistantMessage(content=answer)]
        return history

    async def save(self, session_id: str, question: str, answer: str) -> None:
        async with self._lock:
            window = self._sessions.setdefault(session_id, deque(maxlen=self._turns))
            window.append((question, answer))
