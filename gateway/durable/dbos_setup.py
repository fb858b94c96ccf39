"""How DBOS is set up in this process: its log records go where ours go, and a SQLite store
keeps a write-ahead log."""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing

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


def write_ahead_log(file: str) -> None:
    """SQLite's write-ahead log (kept in the file): a step's records cost about half."""
    try:
        with closing(sqlite3.connect(file, timeout=30)) as db:
            db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error:
        return  # not a database: DBOS says so, in its words
