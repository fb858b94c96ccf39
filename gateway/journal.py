"""A run's record of its model and tool calls: what makes a resumed run repeat none of them.

The engine hands every tool call (and, through `RecordedModel`, every model call) to a
`Journal` under a name that is the same in any process that resumes the run. A journal that
holds a result for that name returns it instead of running the call; one that does not runs
the call and records what it returned. Without a journal the calls just run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Protocol, cast

from pydantic import JsonValue

from agent import (
    AssistantMessage,
    ChatMessage,
    ChatModel,
    ReportsContextWindow,
    ReportsServer,
    ServerAddress,
    TokenCallback,
    ToolDefinition,
)
from agent.model import holds_output_schema
from toolkits.nesting import TooDeep
from toolkits.well_formed import well_formed

__all__ = ["Journal", "RecordedModel", "ScopedJournal", "call_key"]


class Journal(Protocol):
    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        """The recorded result of the call named `name` (unique in its run), else `call()`'s,
        recorded before it is returned. What `call` raises propagates, unrecorded.

        `nested`: the call records calls of its own (an agent run as a tool): they are
        recorded one by one, as they end, not as parts of this one."""
        ...


def call_key(item: int, call_id: str) -> str:
    """What names an agent run as a tool call: among its run's `children`, and as the path of
    its journal (`ScopedJournal.child`). A call id is unique within its item only (two items'
    models may both say `call_0`); the first item's key is the id alone, as before items were
    told apart, so runs stored then resume."""
    return call_id if item == 0 else f"{item}:{call_id}"


class ScopedJournal:
    """A journal for one agent of a run: names carry the path of tool calls that led to it,
    so the same tool-call id in two sub-agents names two calls."""

    def __init__(self, journal: Journal, path: str = "") -> None:
        self._journal = journal
        self.path = path

    def child(self, call_id: str) -> ScopedJournal:
        return ScopedJournal(self._journal, f"{self.path}{call_id}/")

    async def record(
        self, name: str, call: Callable[[], Awaitable[JsonValue]], *, nested: bool = False
    ) -> JsonValue:
        recorded = await self._journal.record(self.path + name, call, nested=nested)
        # A run recorded before its results were made well-formed (`call_node`) may hold a
        # lone surrogate, which no checkpoint could store: read as U+FFFD, it resumes.
        try:
            return well_formed(recorded)
        except TooDeep:  # no result of a call (`call_node` bounds them): kept as it was
            return recorded


class RecordedModel:
    """A model whose answers are recorded: a resumed run gets the same answer to the same
    request (named by a hash of it, and how many times it was asked before in this agent).

    The record is the answer as serialised, without its `response_id` and `response_model`
    (see `AssistantMessage`): an answer just made keeps them; one read from the record has
    none, since no provider gave it now."""

    def __init__(self, model: ChatModel, journal: ScopedJournal) -> None:
        self._model = model
        self._journal = journal
        self._asked: dict[str, int] = {}
        self._reports_server = isinstance(model, ReportsServer)

    @property
    def name(self) -> str:
        return self._model.name

    @property
    def native_output(self) -> bool:
        return holds_output_schema(self._model)  # what it wraps declares (`HoldsOutputSchema`)

    @property
    def wrapped(self) -> ChatModel:
        """The model whose answers are recorded."""
        return self._model

    async def context_window(self) -> int | None:
        """The window the wrapped model reports, so a stored run checks a call's size as an
        unstored one does. Not recorded: it is a safeguard before a call, asked afresh."""
        if isinstance(self._model, ReportsContextWindow):
            return await self._model.context_window()
        return None

    def server_of(self, answer: AssistantMessage | None) -> ServerAddress | None:
        """The wrapped model's word on which server wrote `answer`, for a recorded answer too:
        the same server wrote it when the call was made."""
        if self._reports_server:
            return cast(ReportsServer, self._model).server_of(answer)
        return None

    async def invoke(
        self,
        messages: Sequence[ChatMessage],
        tools: Sequence[ToolDefinition],
        *,
        on_token: TokenCallback | None = None,
    ) -> AssistantMessage:
        request = json.dumps(
            {
                "model": self._model.name,
                "messages": [m.model_dump(mode="json") for m in messages],
                "tools": [t.model_dump(mode="json") for t in tools],
            },
            sort_keys=True,
        )
        key = hashlib.sha256(request.encode()).hexdigest()[:24]
        count = self._asked[key] = self._asked.get(key, 0) + 1

        made: list[AssistantMessage] = []

        async def ask() -> JsonValue:
            answer = await self._model.invoke(messages, tools, on_token=on_token)
            made.append(answer)
            return answer.model_dump(mode="json")

        recorded = AssistantMessage.model_validate(
            await self._journal.record(f"model {key} #{count}", ask)
        )
        if not made:
            return recorded
        identity = {"response_id": made[0].response_id, "response_model": made[0].response_model}
        return recorded.model_copy(update=identity)
