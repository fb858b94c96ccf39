"""What chat memory is made of: the protocol the agent uses, and the storage under it.

The agent sees a `ChatMemory`: `load` a session's history, `save` a finished turn, and
`save_summary` when the history asks for one; whoever runs the agent `hold`s a run's sessions
while it runs. `SessionMemory` is the implementation that
ships: windows and summaries over any `SessionStore` (in process, SQLite, PostgreSQL, Redis),
which only keeps turns and summaries in order.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Collection, Hashable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

from ..messages import ChatMessage
from .session_locks import OnWait

__all__ = [
    "ChatMemory",
    "History",
    "SessionInfo",
    "SessionStore",
    "SharedStore",
    "StoredTurn",
    "Summary",
    "hidden_at",
    "store_key",
]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StoredTurn(_Frozen):
    """One finished turn as its real messages: the user's, every assistant message with its
    tool calls, every tool result, the final answer. `tokens` counts each message."""

    seq: int
    """Order within the session, given by the store (1, 2, ...)."""
    key: str
    """Unique per turn: saving a key again changes nothing."""
    messages: list[ChatMessage]
    tokens: list[int]
    created_at: float = 0.0


class Summary(_Frozen):
    """What the turns up to `through` (a `StoredTurn.seq`) said, written by the agent's model."""

    through: int
    text: str
    tokens: int = 0
    created_at: float = 0.0


class SessionInfo(_Frozen):
    session_id: str
    turns: int
    updated_at: float
    summarised_through: int = 0


@dataclass(frozen=True, slots=True)
class History:
    """A session as the model should see it before a new question.

    `messages` starts with the summary (a system message) when there is one, then whole turns,
    oldest first. `to_summarise` holds the turns that fell out of the window since the last
    summary (the newest of them, when they are too many: see `left_out`), when the memory wants
    them summarised: the agent asks its model for a new summary (`previous_summary` plus
    these) and hands it back with `save_summary(..., through)`.
    """

    messages: Sequence[ChatMessage] = ()
    to_summarise: Sequence[ChatMessage] = ()
    previous_summary: str | None = None
    through: int = 0
    """The last turn `to_summarise` covers."""
    tokens: int = field(default=0)
    """What `messages` weigh, as counted by the memory."""
    left_out: range = range(0)
    """The turns (by seq) that fell out of the window before those in `to_summarise`, too many
    to summarise at once: the new summary goes on without them (they stay stored)."""


@runtime_checkable
class ChatMemory(Protocol):
    """Conversation history across runs, keyed by session id.

    Implementations raise `agent.errors.MemoryStoreError` when their storage fails.
    """

    async def load(self, session_id: str, *, without: str | None = None) -> History:
        """The history to put between the system message and the new question; without the
        turn saved under key `without` (the question's own, when it is asked again)."""
        ...

    async def save(self, session_id: str, key: str, turn: Sequence[ChatMessage]) -> None:
        """Record one finished turn, once: a second save with the same `key` does nothing."""
        ...

    async def save_summary(self, session_id: str, through: int, text: str) -> None:
        """Keep `text` as the summary of every turn up to `through`."""
        ...

    def hold(
        self, session_ids: Collection[str], on_wait: OnWait | None = None
    ) -> AbstractAsyncContextManager[None]:
        """The sessions for one run's turns, from loading their history to saving them:
        another run's turns on them wait (in this process; `on_wait` hears of each wait)."""
        ...


class SessionStore(Protocol):
    """Turns and summaries, kept in order per session. Windows are not its business.

    Every method raises `agent.errors.MemoryStoreError` when the storage fails.
    """

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        """Add a turn after the others; False (and nothing stored) when `key` is stored already."""
        ...

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        """The turns with `after < seq < before`, oldest first; only the `last` N of them
        when given (a long session is read a part at a time)."""
        ...

    async def summary(self, session_id: str) -> Summary | None:
        """The latest summary, if any."""
        ...

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        """Keep `summary` unless one covering more turns is stored already."""
        ...

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """The sessions, most recently updated first: the newest `limit` of them when given
        (a store may keep 100,000), else every one."""
        ...

    async def delete(self, session_id: str) -> bool:
        """Forget a session; False when there was none."""
        ...

    async def prune(self, before: float) -> int:
        """Forget the sessions whose newest turn was saved before `before` (a `time.time()`);
        how many."""
        ...

    async def aclose(self) -> None:
        """Release connections; the store may be used again after (it reconnects)."""
        ...


@runtime_checkable
class SharedStore(Protocol):
    """A store that other URLs may name too (a server's Unix socket and its TCP port, two
    host names): it asks its server which data it keeps, so memories over any of its names
    hold a session as one (`SessionMemory.hold`)."""

    async def identity(self) -> Hashable:
        """What names the data this store keeps, the same for every client that reaches it.
        Raises `agent.errors.MemoryStoreError` when the server does not say."""
        ...


async def store_key(store: SessionStore) -> Hashable:
    """What names the data `store` keeps: what its server says (`SharedStore`), else the
    store object itself. Raises `agent.errors.MemoryStoreError` when the server does not say."""
    if isinstance(store, SharedStore):
        return await store.identity()
    return id(store)


def session_key_error(session_id: str) -> str | None:
    """Why `session_id` cannot name a session, or None."""
    if not session_id or len(session_id) > 256:
        return "a session id has 1 to 256 characters"
    if any(unicodedata.category(c) == "Cc" for c in session_id):  # C0, DEL and C1
        return "a session id has no control characters"
    # Invisible (U+200B, U+FEFF), reordering (U+202E) or breaking the line (U+2028): two ids
    # that look alike in a listing, or one that cannot be typed to delete it.
    unseen = next((i for i in range(len(session_id)) if hidden_at(session_id, i)), None)
    if unseen is None:
        return None
    code = f"U+{ord(session_id[unseen]):04X}"
    if session_id[unseen] in _JOINERS:
        return (
            f"a session id has a zero width joiner or non-joiner ({code}) only between two "
            "letters, marks or symbols beyond ASCII (an emoji sequence, a Persian or Indic word)"
        )
    return f"a session id has no invisible format characters or line separators ({code})"


def hidden_at(session_id: str, index: int) -> bool:
    """Whether the character at `index` is one a session id never has there: a format
    character or line separator (Unicode categories Cf, Zl, Zp), but for a zero width
    (non-)joiner between two characters it joins (`_JOINERS`)."""
    char = session_id[index]
    if unicodedata.category(char) not in _UNSEEN:
        return False
    if char not in _JOINERS or not 0 < index < len(session_id) - 1:
        return True
    neighbours = (session_id[index - 1], session_id[index + 1])
    return not all(c > "\x7f" and unicodedata.category(c)[0] in "LMS" for c in neighbours)


_UNSEEN = frozenset({"Cf", "Zl", "Zp"})
"""Unicode categories of characters a session id never has: format, line and paragraph
separators."""
_JOINERS = frozenset("\u200c\u200d")
"""ZWNJ and ZWJ, format characters that words need: in Persian (U+200C between a word's
parts), in Indic scripts (after a virama) and in emoji sequences (U+200D). Taken between two
letters, marks or symbols beyond ASCII; next to ASCII, at an end or beside each other they
join nothing a reader sees, and `a<ZWJ>b` would list as `ab`."""
