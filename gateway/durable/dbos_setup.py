"""How DBOS is set up in this process: its log records go where ours go, each in one line,
and a SQLite store keeps a write-ahead log."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing

from .endings import ItemsFailed
from .outage import suspect
from .record_format import pickled
from .sqlite_lock import quiet

__all__ = ["log_through_ours", "write_ahead_log"]


def log_through_ours() -> None:
    """DBOS's log records go where ours go (at WARNING: not its INFO lines and Conductor
    hint), not to the stderr it found when it was first set up (gone, in tests)."""
    dbos_log = logging.getLogger("dbos")
    for handler in list(dbos_log.handlers):
        if handler.name == "__dbos_console_log_handler__":
            dbos_log.removeHandler(handler)
    if not dbos_log.handlers:
        dbos_log.addHandler(logging.NullHandler())  # DBOS adds its own console to none
    dbos_log.propagate = True
    dbos_log.setLevel(logging.WARNING)
    if not any(isinstance(f, _OneLine) for f in dbos_log.filters):
        dbos_log.addFilter(_OneLine())


_SAID_BY_US = (
    "DBOS failed to launch",
    "Error connecting to the DBOS system database",
    "Could not connect to postgres database to verify existence",
    "Asyncio task cancelled for workflow or step",  # a run interrupted here, on purpose
)
"""DBOS's words for what we say ourselves: a store that cannot be opened (`open_runs` says
why in one line), a run interrupted as the command stops."""
_REFUSED = str(pickled())
"""A record in the pickle format, refused: DBOS's listings log it and go on; we raise it,
naming the run."""


class _OneLine(logging.Filter):
    """Drops DBOS's records of a store it cannot open, and folds any other traceback or
    multi-line message (SQL, parameters) into its first line: a store's failure is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        if suspect(record):
            return False  # a store gone away: the outage watch says it once (`outage`)
        if quiet(record):
            return False  # a store locked: its wait says it once (`sqlite_lock`)
        message = record.getMessage()
        if message.startswith(_SAID_BY_US) or _REFUSED in message:
            return False
        cause = record.exc_info[1] if record.exc_info else None
        if isinstance(cause, ItemsFailed):
            return False  # ended so on purpose (the run is `failed`); the command says why
        if cause is None and "\n" not in message:
            return True
        first = message.strip().splitlines()[0] if message.strip() else ""
        if cause is not None:
            said = (str(cause).strip().splitlines() or [""])[0]
            first = f"{first} {type(cause).__name__}: {said}".strip()
        record.msg, record.args = first, None
        record.exc_info = record.exc_text = None
        return True


def write_ahead_log(file: str) -> None:
    """SQLite's write-ahead log (kept in the file): a step's records cost about half."""
    try:
        with closing(sqlite3.connect(file, timeout=30)) as db:
            db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error:
        return  # not a database: DBOS says so, in its words
