"""Turns in a SQLite file: the default store, shared by every process on the machine.

Each message is a row (`memory_messages`, JSON in `message`) of a turn (`memory_turns`);
summaries are in `memory_summaries`. The file is in WAL mode, so readers never wait for a
writer, and appends take the write lock first (`BEGIN IMMEDIATE`), so two processes adding to
one session get consecutive turn numbers.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Generator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import anyio

from ..errors import MemoryStoreError
from ..messages import ChatMessage
from ._private import private_sqlite_file
from ._read_only import read_only_sqlite
from ._rows import message_json, turns_from_rows
from ._sqlite_failures import failure_text
from .base import SessionInfo, StoredTurn, Summary

__all__ = ["SQLiteStore"]

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_turns (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    key TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, key)
);
CREATE TABLE IF NOT EXISTS memory_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    message TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq, position)
);
CREATE TABLE IF NOT EXISTS memory_summaries (
    session_id TEXT PRIMARY KEY,
    through INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    created_at REAL NOT NULL
);
"""

_SELECT_TURNS = """
SELECT t.seq, t.key, t.created_at, m.message, m.tokens
FROM memory_turns t JOIN memory_messages m ON m.session_id = t.session_id AND m.seq = +t.seq
WHERE t.session_id = ? AND t.seq > ? AND t.seq > ? AND t.seq < ?
ORDER BY t.seq, m.position
"""
"""A turn's messages are found by its number (`m.seq = +t.seq`). Without the `+`, SQLite
copies the range on `t.seq` to `m.seq` and searches `m` by that range once per turn: reading
a session whole took time quadratic in its length (35 s for 5,000 turns)."""


_STALE = "SELECT session_id FROM memory_turns GROUP BY session_id HAVING MAX(created_at) < ?"
"""The sessions whose newest turn is older than the time given."""

_NO_END = 2**62
"""A turn number no session reaches: `before` when none is given."""


class SQLiteStore:
    """A `SessionStore` in the SQLite file at `path` (created, with its directory, on first use).

    With `read_only`, the file is only read, as it is (`read_only_sqlite`: where this process
    may not write it or its directory too); a file without the memory's tables reads as empty,
    and writing fails.
    """

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._connection: sqlite3.Connection | None = None
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        rows = [(m.role, message_json(m), t) for m, t in zip(messages, tokens, strict=True)]

        def append(db: sqlite3.Connection) -> bool:
            with _writing(db):
                known = db.execute(
                    "SELECT 1 FROM memory_turns WHERE session_id = ? AND key = ?",
                    (session_id, key),
                ).fetchone()
                if known is not None:
                    return False
                (seq,) = db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM memory_turns WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                db.execute(
                    "INSERT INTO memory_turns VALUES (?, ?, ?, ?)",
                    (session_id, seq, key, time.time()),
                )
                db.executemany(
                    "INSERT INTO memory_messages VALUES (?, ?, ?, ?, ?, ?)",
                    [(session_id, seq, i, *row) for i, row in enumerate(rows)],
                )
                return True

        return await self._run(append)

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        below = _NO_END if before is None else before

        def read(db: sqlite3.Connection) -> list[StoredTurn]:
            floor = 0
            if last is not None:
                (newest,) = db.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM memory_turns "
                    "WHERE session_id = ? AND seq < ?",
                    (session_id, below),
                ).fetchone()
                floor = newest - last
            rows = db.execute(_SELECT_TURNS, (session_id, after, floor, below)).fetchall()
            return turns_from_rows(rows)

        return await self._run(read)

    async def summary(self, session_id: str) -> Summary | None:
        def read(db: sqlite3.Connection) -> Summary | None:
            row = db.execute(
                "SELECT through, text, tokens, created_at FROM memory_summaries "
                "WHERE session_id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                return None
            return Summary(through=row[0], text=row[1], tokens=row[2], created_at=row[3])

        return await self._run(read)

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        def write(db: sqlite3.Connection) -> None:
            with _writing(db):
                db.execute(
                    "INSERT INTO memory_summaries VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (session_id) DO UPDATE SET through = excluded.through, "
                    "text = excluded.text, tokens = excluded.tokens, "
                    "created_at = excluded.created_at "
                    "WHERE excluded.through > memory_summaries.through",
                    (
                        session_id,
                        summary.through,
                        summary.text,
                        summary.tokens,
                        summary.created_at,
                    ),
                )

        await self._run(write)

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        def read(db: sqlite3.Connection) -> list[SessionInfo]:
            rows = db.execute(
                "SELECT t.session_id, COUNT(*), MAX(t.created_at), COALESCE(s.through, 0) "
                "FROM memory_turns t LEFT JOIN memory_summaries s USING (session_id) "
                "GROUP BY t.session_id ORDER BY MAX(t.created_at) DESC, t.session_id LIMIT ?",
                (-1 if limit is None else limit,),  # -1: no limit
            ).fetchall()
            return [
                SessionInfo(session_id=r[0], turns=r[1], updated_at=r[2], summarised_through=r[3])
                for r in rows
            ]

        return await self._run(read)

    async def delete(self, session_id: str) -> bool:
        def delete(db: sqlite3.Connection) -> bool:
            with _writing(db):
                found = db.execute(
                    "DELETE FROM memory_turns WHERE session_id = ?", (session_id,)
                ).rowcount
                db.execute("DELETE FROM memory_messages WHERE session_id = ?", (session_id,))
                db.execute("DELETE FROM memory_summaries WHERE session_id = ?", (session_id,))
            return found > 0

        return await self._run(delete)

    async def prune(self, before: float) -> int:
        def prune(db: sqlite3.Connection) -> int:
            with _writing(db):
                (found,) = db.execute(f"SELECT COUNT(*) FROM ({_STALE})", (before,)).fetchone()
                for table in ("memory_messages", "memory_summaries", "memory_turns"):
                    db.execute(f"DELETE FROM {table} WHERE session_id IN ({_STALE})", (before,))
            return int(found)

        return await self._run(prune)

    async def vacuum(self) -> None:
        """Give the space deleted rows left back to the file system (the file shrinks; of the
        runs kept in it too). It rewrites the file, and writers wait meanwhile."""

        def vacuum(db: sqlite3.Connection) -> None:
            db.execute("VACUUM")
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

        await self._run(vacuum)

    async def aclose(self) -> None:
        async with self._lock:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                await anyio.to_thread.run_sync(connection.close)

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """`work` on the connection, in a worker thread, one at a time."""
        async with self._lock:
            try:
                if self._connection is None:
                    self._connection = await anyio.to_thread.run_sync(self._connect)
                return await anyio.to_thread.run_sync(work, self._connection)
            except sqlite3.Error as exc:
                raise MemoryStoreError(
                    f"chat memory {self.path}: {failure_text(self.path, exc)}"
                ) from exc

    def _connect(self) -> sqlite3.Connection:
        if self.read_only:
            return _read_only(self.path)
        try:
            private_sqlite_file(self.path, "chat memory")
        except OSError as exc:
            raise sqlite3.OperationalError(f"cannot create {self.path}: {exc}") from exc
        # isolation_level=None: we say BEGIN ourselves; check_same_thread: one worker at a time.
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(SCHEMA)
        except BaseException:
            db.close()
            raise
        return db


def _read_only(path: Path) -> sqlite3.Connection:
    """`path` opened to read, each memory table it lacks an empty one (a temporary table, in
    this connection alone: nothing is written to the file)."""
    db = read_only_sqlite(path)
    try:
        found = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        for table in SCHEMA.split(";"):
            name = table.split("EXISTS", 1)[-1].split("(", 1)[0].strip()
            if table.strip() and name not in found:
                db.execute(table.replace("CREATE TABLE", "CREATE TEMP TABLE"))
        db.execute("PRAGMA query_only = ON")  # a write fails, not kept in the temporary ones
    except BaseException:
        db.close()
        raise
    return db


@contextmanager
def _writing(db: sqlite3.Connection) -> Generator[None]:
    """A transaction that holds the write lock from its start (no upgrade deadlocks)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # SQLite may have rolled it back already (a full disk does): a ROLLBACK then fails,
        # and its error would hide the one that says why.
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
