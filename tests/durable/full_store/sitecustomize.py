"""A full disk for the run store, in a subprocess of the tests: on the PYTHONPATH with
`FULL_STORE=FILE`, every SQLite connection to FILE may not grow it by a page (SQLite's
`max_page_count`), so a write that needs room fails as on a full disk: "database or disk is
full". Nothing else changes."""

from __future__ import annotations

import os
import sqlite3
from typing import Any

_FILE = os.environ.get("FULL_STORE")

if _FILE:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    with sqlite3.connect(_FILE) as _connection:
        _PAGES = _connection.execute("PRAGMA page_count").fetchone()[0]

    @event.listens_for(Engine, "connect")
    def _full(connection: Any, record: Any) -> None:
        if isinstance(connection, sqlite3.Connection):
            connection.execute(f"PRAGMA max_page_count = {_PAGES}")
