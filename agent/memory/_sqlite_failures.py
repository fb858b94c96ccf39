"""What a SQLite memory file's failure says: SQLite's words, and what to do when its disk is
full, as the run store says it (`database or disk is full: free some space on its disk`).

A full disk shows in three ways: SQLITE_FULL (a write to the file or its -wal), an I/O error
growing the -shm file (every read and write of a file in WAL mode needs it: SQLite says only
"disk I/O error"), and no space to make the file or its directory.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

__all__ = ["failure_text"]

FREE_SPACE = "free some space on its disk"
_FULL_BELOW = 1 << 20
"""Free bytes under which a disk that failed to grow the -shm file (32 KB at a time) is full."""


def failure_text(path: Path, exc: sqlite3.Error) -> str:
    """Why the memory file at `path` failed with `exc`, in one line."""
    said = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL:
        return f"{said}: {FREE_SPACE}"
    if code == sqlite3.SQLITE_IOERR_SHMSIZE and _free_bytes(path.parent) < _FULL_BELOW:
        return f"disk is full ({said} growing its -shm file): {FREE_SPACE}"
    cause = exc.__cause__
    if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
        return f"{said}: {FREE_SPACE}"
    return said


def _free_bytes(folder: Path) -> int:
    try:
        found = os.statvfs(folder)
    except OSError:
        return _FULL_BELOW  # not known: SQLite's words alone
    return found.f_bavail * found.f_frsize
