"""Turns in PostgreSQL (psycopg 3): for gateways on several machines.

The same tables as the SQLite store (`memory_turns`, `memory_messages` with each message as
`json`, `memory_summaries`), created on first use, and the database too if it does not exist
(as the run store does); a store opened with `make=False` makes neither (`sessions`
commands: a mistyped name made an empty database): where they are not, it reads nothing and
deletes nothing. Appends to one session are serialised by a transaction-scoped advisory lock, so
concurrent writers get consecutive turn numbers. A connection the server ended (a restart) is
replaced at its next use, which runs once more; a server that does not answer (stopped, a
network that drops everything) fails the use after `answer_wait` seconds.
psycopg is a dependency of the package (the run store's driver too).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar, cast

import anyio
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from ..errors import MemoryStoreError, MemoryWriteUnknown
from ..messages import ChatMessage
from ..url_credentials import driver_said, redacted
from ._asyncio_only import check_asyncio
from ._rows import message_json, turns_from_rows
from .base import SessionInfo, StoredTurn, Summary
from .postgres_database import create_database, database_missing, not_made

__all__ = ["PostgresStore"]

T = TypeVar("T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS memory_turns (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    key TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (session_id, seq),
    UNIQUE (session_id, key)
);
CREATE TABLE IF NOT EXISTS memory_messages (
    session_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    position INTEGER NOT NULL,
    role TEXT NOT NULL,
    message JSON NOT NULL,
    tokens INTEGER NOT NULL,
    PRIMARY KEY (session_id, seq, position)
);
CREATE TABLE IF NOT EXISTS memory_summaries (
    session_id TEXT PRIMARY KEY,
    through BIGINT NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
"""
_SCHEMA_LOCK = 0x61676D656D  # any constant: processes creating the tables take turns

_SELECT_TURNS = """
SELECT t.seq, t.key, t.created_at, m.message, m.tokens
FROM memory_turns t JOIN memory_messages m ON m.session_id = t.session_id AND m.seq = t.seq
WHERE t.session_id = %s AND t.seq > %s AND t.seq > %s AND t.seq < %s
ORDER BY t.seq, m.position
"""

_STALE = "SELECT session_id FROM memory_turns GROUP BY session_id HAVING MAX(created_at) < %s"
"""The sessions whose newest turn is older than the time given."""

_NO_END = 2**62
"""A turn number no session reaches: `before` when none is given."""
ANSWER_WAIT = 30.0
"""Seconds a use of the store (connecting included) may wait for the server: a stopped server
or a network that drops everything otherwise hangs the turn, and every session of the
process behind it, for ever (the kernel keeps an idle connection open)."""
_UNMADE = (psycopg.errors.InvalidCatalogName, psycopg.errors.UndefinedTable)
"""What reading a database or tables not made yet raises."""

Connection = psycopg.AsyncConnection[tuple[Any, ...]]

_CANCEL_NOTICES = ("query cancellation interrupted", "query not terminated after cancellation")
"""psycopg's warnings when `answer_wait` cancels a query of a server that does not answer:
its own cancel request is cut short too (or unanswered) and it closes the connection, which
`_run` drops and reports in its error. A second line on stderr tells the user nothing more."""


def _not_a_cancel_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(_CANCEL_NOTICES)


logging.getLogger("psycopg").addFilter(_not_a_cancel_notice)


class _Made:
    """`_run`'s `absent` when none is given: the store must be made for `work`."""


class _NotMade(psycopg.OperationalError):
    """The database a store that makes nothing (`make=False`) names does not exist."""


class PostgresStore:
    """A `SessionStore` in the PostgreSQL database at `url` (`postgresql://user@host/db`)."""

    def __init__(self, url: str, *, make: bool = True, answer_wait: float = ANSWER_WAIT) -> None:
        self._url = url
        self.make = make
        self._answer_wait = answer_wait
        self._connection: Connection | None = None
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"PostgresStore({redacted(self._url)!r})"

    async def append(
        self, session_id: str, key: str, messages: Sequence[ChatMessage], tokens: Sequence[int]
    ) -> bool:
        async def append(db: Connection) -> bool:
            async with db.transaction():
                await db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (session_id,))
                found = await db.execute(
                    "SELECT 1 FROM memory_turns WHERE session_id = %s AND key = %s",
                    (session_id, key),
                )
                if await found.fetchone() is not None:
                    return False
                cursor = await db.execute(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM memory_turns WHERE session_id = %s",
                    (session_id,),
                )
                row = await cursor.fetchone()
                assert row is not None
                seq = int(row[0])
                await db.execute(
                    "INSERT INTO memory_turns VALUES (%s, %s, %s, %s)",
                    (session_id, seq, key, time.time()),
                )
                async with db.cursor() as many:
                    await many.executemany(
                        "INSERT INTO memory_messages VALUES (%s, %s, %s, %s, %s::json, %s)",
                        [
                            (session_id, seq, i, m.role, message_json(m), t)
                            for i, (m, t) in enumerate(zip(messages, tokens, strict=True))
                        ],
                    )
                return True

        return await self._run(append, writes=True)

    async def turns(
        self,
        session_id: str,
        *,
        after: int = 0,
        before: int | None = None,
        last: int | None = None,
    ) -> list[StoredTurn]:
        below = _NO_END if before is None else before

        async def read(db: Connection) -> list[StoredTurn]:
            floor = 0
            if last is not None:
                cursor = await db.execute(
                    "SELECT COALESCE(MAX(seq), 0) FROM memory_turns "
                    "WHERE session_id = %s AND seq < %s",
                    (session_id, below),
                )
                row = await cursor.fetchone()
                floor = int(row[0]) - last if row else 0
            cursor = await db.execute(_SELECT_TURNS, (session_id, after, floor, below))
            return turns_from_rows(await cursor.fetchall())

        return await self._run(read, absent=[])

    async def summary(self, session_id: str) -> Summary | None:
        async def read(db: Connection) -> Summary | None:
            cursor = await db.execute(
                "SELECT through, text, tokens, created_at FROM memory_summaries "
                "WHERE session_id = %s",
                (session_id,),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            return Summary(through=row[0], text=row[1], tokens=row[2], created_at=row[3])

        return await self._run(read, absent=None)

    async def put_summary(self, session_id: str, summary: Summary) -> None:
        # A text column holds no NUL, which a model may echo from a question (messages are
        # JSON, escaped): one failed every later turn of the session, for good.
        text = summary.text.replace("\x00", "\ufffd")

        async def write(db: Connection) -> None:
            await db.execute(
                "INSERT INTO memory_summaries VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (session_id) DO UPDATE SET through = excluded.through, "
                "text = excluded.text, tokens = excluded.tokens, created_at = excluded.created_at "
                "WHERE excluded.through > memory_summaries.through",
                (session_id, summary.through, text, summary.tokens, summary.created_at),
            )

        await self._run(write, writes=True)

    async def sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        async def read(db: Connection) -> list[SessionInfo]:
            cursor = await db.execute(
                "SELECT t.session_id, COUNT(*), MAX(t.created_at), COALESCE(MAX(s.through), 0) "
                "FROM memory_turns t LEFT JOIN memory_summaries s USING (session_id) "
                "GROUP BY t.session_id ORDER BY MAX(t.created_at) DESC, t.session_id LIMIT %s",
                (limit,),  # None: LIMIT NULL, no limit
            )
            return [
                SessionInfo(session_id=r[0], turns=r[1], updated_at=r[2], summarised_through=r[3])
                for r in await cursor.fetchall()
            ]

        return await self._run(read, absent=[])

    async def delete(self, session_id: str) -> bool:
        async def delete(db: Connection) -> bool:
            async with db.transaction():
                cursor = await db.execute(
                    "DELETE FROM memory_turns WHERE session_id = %s", (session_id,)
                )
                await db.execute("DELETE FROM memory_messages WHERE session_id = %s", (session_id,))
                await db.execute(
                    "DELETE FROM memory_summaries WHERE session_id = %s", (session_id,)
                )
                return cursor.rowcount > 0

        return await self._run(delete, writes=True, absent=False)

    async def prune(self, before: float) -> int:
        async def prune(db: Connection) -> int:
            async with db.transaction():
                cursor = await db.execute(f"SELECT COUNT(*) FROM ({_STALE}) AS stale", (before,))
                row = await cursor.fetchone()
                for table in ("memory_messages", "memory_summaries", "memory_turns"):
                    await db.execute(
                        sql.SQL("DELETE FROM {} WHERE session_id IN (" + _STALE + ")").format(
                            sql.Identifier(table)
                        ),
                        (before,),
                    )
                return int(row[0]) if row else 0

        return await self._run(prune, writes=True, absent=0)

    async def aclose(self) -> None:
        async with self._lock:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                with anyio.CancelScope(shield=True):
                    await connection.close()

    async def _run(
        self,
        work: Callable[[Connection], Awaitable[T]],
        *,
        writes: bool = False,
        absent: T | type[_Made] = _Made,
    ) -> T:
        """`work` on the store's connection, one at a time; `absent` for a use of a store
        that makes nothing (`make=False`) and is not made yet.

        A kept connection the server ended since its last use (a restart, an administrator's
        `pg_terminate_backend`) fails only at that use: `work` runs once more on a new one.
        Every `work` may run twice: the broken transaction was rolled back, and a turn or a
        summary written again is stored once (turn keys; summaries only move forward).
        A server that does not answer within `answer_wait` fails it (a write that may have
        been applied raises `MemoryWriteUnknown`), and the connection is dropped.
        """
        check_asyncio("PostgreSQL", self._url)  # before a connection is made: none to close
        where = f"chat memory {redacted(self._url)}"
        async with self._lock:
            kept = self._connection is not None and not self._connection.closed
            try:
                with anyio.fail_after(self._answer_wait):
                    try:
                        return await self._attempt(work)
                    except psycopg.Error:
                        if not kept or self._connection is not None:
                            raise  # a new connection failed, or the query did: not a broken one
                        return await self._attempt(work)
            except TimeoutError as exc:
                await self._drop()
                said = f"{where}: the server did not answer within {self._answer_wait:g} s"
                if writes:
                    raise MemoryWriteUnknown(said) from exc
                raise MemoryStoreError(said) from exc
            except psycopg.Error as exc:
                unmade = isinstance(exc, (_NotMade, *_UNMADE))
                if not self.make and unmade and absent is not _Made:
                    return cast(T, absent)
                raise MemoryStoreError(f"{where}: {driver_said(self._url, exc)}") from exc

    async def _drop(self) -> None:
        """Forget a connection whose server did not answer: closing it waits for nothing."""
        connection, self._connection = self._connection, None
        if connection is not None:
            with anyio.CancelScope(shield=True):
                await connection.close()

    async def _attempt(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        try:
            if self._connection is None or self._connection.closed:
                self._connection = await self._connect()
            return await work(self._connection)
        except psycopg.Error:
            if self._connection is not None and self._connection.broken:
                self._connection = None  # connect anew
            raise

    async def _connect(self) -> Connection:
        if not self.make:  # no database, no tables: a typo's would be made empty
            try:
                return await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            except psycopg.OperationalError as exc:
                if await database_missing(self._url):
                    raise _NotMade(str(exc)) from exc
                raise
        try:
            db = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        except psycopg.OperationalError:
            if not await _made_database(self._url):  # no such database: made, as the run store's
                raise
            db = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        try:
            async with db.transaction():
                await db.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                await db.execute(SCHEMA)
        except BaseException:
            await db.close()
            raise
        return db


async def _made_database(url: str) -> bool:
    """Whether the database `url` names did not exist and is now made. Raises
    `MemoryStoreError`, saying how to make it, when making it fails."""
    made = await create_database(url)
    if isinstance(made, str):
        name = str(conninfo_to_dict(url).get("dbname") or "")
        raise MemoryStoreError(f"chat memory {redacted(url)}: {not_made(name, made)}")
    return made
