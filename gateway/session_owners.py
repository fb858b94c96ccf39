"""Whose a chat memory session is: an authenticated caller's sessions are its own.

A run started by an authenticated caller (`RunState.started_by`: an OAuth token's
`<issuer>#<sub>`, a static token's label, the identity its stored run is kept under, see
`authenticated_subject`) keeps its conversations
under `@<caller>/<session_id>`, so another caller naming the same `session_id` gets a
conversation of its own, empty at first. A run nobody authenticated (the command line, a
server without tokens) uses the session id as given: the stored key, which is how the
operator reaches a caller's session (`run --session @alice/s1`, `sessions show @alice/s1`).

The key is composed here, above the stores, so every store keeps sessions as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Sequence
from contextlib import AbstractAsyncContextManager
from urllib.parse import unquote

from agent import ChatMemory, ChatMessage, History, MemoryStoreError
from agent.memory.base import session_key_error
from agent.memory.session_locks import OnWait

__all__ = [
    "OwnedMemory",
    "owned_memory",
    "owned_session",
    "session_id_problem",
    "session_owner",
]

_MARK = "@"


def owned_session(owner: str, session_id: str) -> str:
    """The stored key of `owner`'s session `session_id`. `/` and `%` in the owner are
    escaped, so the first `/` ends it and no two callers' keys meet."""
    escaped = owner.replace("%", "%25").replace("/", "%2F")
    return f"{_MARK}{escaped}/{session_id}"


def session_owner(key: str) -> str | None:
    """Whose the session stored under `key` is (None: nobody's, a session kept as named)."""
    if not key.startswith(_MARK):
        return None
    escaped, separator, _ = key[len(_MARK) :].partition("/")
    return unquote(escaped) if separator and escaped else None


def session_id_problem(session_id: str, owner: str | None) -> str | None:
    """Why `session_id` cannot name a session of `owner`'s (None: a run nobody
    authenticated, whose ids are kept as named), or None."""
    problem = session_key_error(session_id)
    if problem is not None or owner is None:
        return problem
    key = owned_session(owner, session_id)
    if session_key_error(key) is None:
        return None
    return (
        f"the stored key adds the caller's name ({len(key) - len(session_id)} characters) and "
        "a session id has at most 256 with it; use a shorter one"
    )


def owned_memory(memory: ChatMemory | None, owner: str | None) -> ChatMemory | None:
    """`memory` as `owner` sees it; as it is for a run nobody authenticated."""
    if memory is None or owner is None:
        return memory
    return OwnedMemory(memory, owner)


class OwnedMemory:
    """A `ChatMemory` whose session ids are `owner`'s own (see the module's docstring)."""

    def __init__(self, memory: ChatMemory, owner: str) -> None:
        self.memory = memory
        self.owner = owner

    def __repr__(self) -> str:
        return f"OwnedMemory({self.memory!r}, owner={self.owner!r})"

    def _key(self, session_id: str) -> str:
        problem = session_id_problem(session_id, self.owner)
        if problem is not None:
            raise MemoryStoreError(f"bad session id {session_id[:40]!r}: {problem}")
        return owned_session(self.owner, session_id)

    async def load(self, session_id: str, *, without: str | None = None) -> History:
        return await self.memory.load(self._key(session_id), without=without)

    async def save(self, session_id: str, key: str, turn: Sequence[ChatMessage]) -> None:
        await self.memory.save(self._key(session_id), key, turn)

    async def save_summary(self, session_id: str, through: int, text: str) -> None:
        await self.memory.save_summary(self._key(session_id), through, text)

    def hold(
        self, session_ids: Collection[str], on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[None]:
        keys: list[str] = []
        for session_id in session_ids:
            # A bad id is held by nobody: loading its history says what is wrong with it.
            with contextlib.suppress(MemoryStoreError):
                keys.append(self._key(session_id))
        return self.memory.hold(keys, on_wait)
