"""A SQLite file only its owner may read: every prompt, answer and tool result is in it."""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

__all__ = ["private_sqlite_file"]

logger = logging.getLogger("agent.memory")

_SIDE_FILES = ("", "-wal", "-shm", "-journal")
"""The database and the files SQLite keeps beside it (made with the database's mode)."""

_warned: set[Path] = set()
"""Databases already warned about: the run store and chat memory often share one."""


def private_sqlite_file(path: Path, what: str) -> None:
    """Make `path`'s directory (mode 0700) and the empty database file (0600) if they are
    missing, whatever the umask; SQLite gives its -wal and -shm files the database's mode.

    Files that exist with wider modes are left as they are (a store shared on purpose, by a
    group, stays so): one warning names them and the fix. `what` names the store in it.
    Raises `OSError` when the directory or the file cannot be made.
    """
    if not path.parent.is_dir():
        # Its parents get the default mode: only the directory the store is in is ours.
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    wide = [file for file in (Path(f"{path}{suffix}") for suffix in _SIDE_FILES) if _open(file)]
    if wide and path not in _warned and _sqlite(path):  # another file: opening it will say
        _warned.add(path)
        logger.warning(
            "%s %s is open to other users (%s): chmod 600 %s",
            what,
            path,
            ", ".join(f"{file.name} mode {_mode(file):04o}" for file in wide),
            " ".join(str(file) for file in wide),
        )


def _sqlite(file: Path) -> bool:
    """Whether `file` is an SQLite database (or empty: one to be)."""
    try:
        with file.open("rb") as opened:
            head = opened.read(16)
    except OSError:
        return False
    return not head or head == b"SQLite format 3\x00"


def _open(file: Path) -> bool:
    """Whether `file` is there with any permission for its group or others."""
    return bool(_mode(file) & 0o077)


def _mode(file: Path) -> int:
    try:
        return stat.S_IMODE(file.stat().st_mode)
    except OSError:
        return 0  # not there (or not ours to look at: opening it will say)
