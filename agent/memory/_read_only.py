"""Reading a SQLite file this process may not write: a backup, another user's store, a
directory made read-only (`chmod 555`, the file 444).

SQLite's read-only mode still needs a `-shm` file beside a database in WAL mode (the run store
and chat memory are), and makes one; where the directory refuses it, opening fails with
"attempt to write a readonly database". Such a file, with no `-wal` file holding changes not
in it yet (none is left once its last writer closed), is complete as it is: it is read as
immutable, which needs no side file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

__all__ = ["read_only_sqlite"]


def read_only_sqlite(path: Path) -> sqlite3.Connection:
    """A connection that only reads the SQLite database at `path` (any thread may use it, one
    at a time). Raises `sqlite3.Error` when it cannot be read, saying why."""
    uri = path.absolute().as_uri()
    db = sqlite3.connect(f"{uri}?mode=ro", uri=True, check_same_thread=False)
    try:
        db.execute("SELECT 1 FROM sqlite_master LIMIT 1")  # opening is lazy: this opens
        return db
    except sqlite3.OperationalError as exc:
        db.close()
        if os.access(path.parent, os.W_OK) and os.access(path, os.W_OK):
            raise  # not a matter of rights: say what SQLite says
        wal = Path(f"{path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            raise sqlite3.OperationalError(
                f"{exc}: its -wal file holds changes not in the database yet, and reading them "
                "needs write access to its directory (or a copy where you have it)"
            ) from None
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, check_same_thread=False)
