"""This process's writes to its SQLite run store: one transaction at a time, in the order
they asked.

SQLite keeps no queue for its write lock: a connection that finds it taken sleeps and looks
again (after 1 ms, then longer, 100 ms apart at last) until its busy timeout. DBOS writes on
up to 20 pooled connections at once, a write each, from as many threads. At volume (100 runs
at once on a loaded machine) a write lost every race for the lock for `BUSY_SECONDS` though
each holder kept it a few milliseconds (99 in 100 under 15 ms): it failed as if another
process held the store, the warning said so, and the runs waited seconds for nothing.

So the store's engines take a turn before a statement that writes, and give it back once
the transaction ended (committed or rolled back, the connection returned to the pool): the
writes of this process wait for each other in order, asleep, and SQLite's busy timeout is
left to other processes' locks (`sqlite_lock`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

__all__ = ["LOOK_SECONDS", "WriteTurns"]

LOOK_SECONDS = 0.5
"""How often a write waiting for its turn asks whether to go on waiting."""
_WRITES = ("INSERT", "UPDATE", "DELETE", "REPLACE", "BEGIN", "SAVEPOINT", "CREATE", "DROP")
"""How a statement that takes SQLite's write lock (or begins a transaction that will) begins."""


@dataclass(eq=False)
class _Turn:
    connection: Any
    thread: int
    given: threading.Event = field(default_factory=threading.Event)


class WriteTurns:
    """The turns of one store's writes in this process; DBOS's threads share it."""

    def __init__(self, patience: Callable[[float], None]) -> None:
        self._patience = patience
        """Asked every `LOOK_SECONDS` by a write waiting for its turn, with the seconds the
        one that has it has held it: raises to stop waiting (the store closes, a write
        that never lets go)."""
        self._guard = threading.Lock()
        self._holder: _Turn | None = None
        self._since = 0.0
        """When the holder took its turn (`time.monotonic`)."""
        self._waiting: deque[_Turn] = deque()

    def bind(self, engine: Engine) -> None:
        """`engine`'s writes take their turn."""
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        for ended in ("checkin", "close", "detach", "invalidate"):
            event.listen(engine, ended, self._connection_ended)

    def _before(self, _conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        connection = cursor.connection
        if self._holds(connection):
            if connection.in_transaction:
                return
            self._give_back(connection)  # its transaction ended; the connection goes on
        if statement.lstrip()[:9].upper().startswith(_WRITES):
            self._take(connection)

    def _after(self, _conn: Any, cursor: Any, *_: Any) -> None:
        connection = cursor.connection
        if self._holds(connection) and not connection.in_transaction:
            self._give_back(connection)  # a write outside a transaction, done

    def _connection_ended(self, connection: Any, *_: Any) -> None:
        if connection is not None:
            self._give_back(connection)

    def _holds(self, connection: Any) -> bool:
        holder = self._holder  # only the connection's own thread makes it the holder
        return holder is not None and holder.connection is connection

    def _take(self, connection: Any) -> None:
        turn = _Turn(connection, threading.get_ident())
        with self._guard:
            if self._holder is None:
                self._hold(turn)
                return
            if self._holder.thread == turn.thread:
                # This thread's other transaction has it: waiting here would never end.
                # SQLite's busy timeout decides, as it did before turns.
                return
            self._waiting.append(turn)
        while not turn.given.wait(LOOK_SECONDS):
            try:
                self._patience(time.monotonic() - self._since)
            except BaseException:
                with self._guard:
                    handed = turn.given.is_set()
                    if not handed:
                        self._waiting.remove(turn)
                if handed:  # it came meanwhile: the next one's now
                    self._give_back(connection)
                raise

    def _hold(self, turn: _Turn) -> None:
        self._holder, self._since = turn, time.monotonic()

    def _give_back(self, connection: Any) -> None:
        with self._guard:
            if self._holder is None or self._holder.connection is not connection:
                return
            if self._waiting:
                turn = self._waiting.popleft()
                self._hold(turn)
                turn.given.set()
            else:
                self._holder = None
