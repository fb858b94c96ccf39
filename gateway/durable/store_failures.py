"""Why a run store cannot be used, in one line with what to do, and whose fault that is.

    StoreError           exit 2: the URL or the file is not a store (bad input), or a SQLite
                         file found damaged as it is opened or read
    └── StoreUnavailable exit 1: the store cannot be used now: a PostgreSQL server away, or
                         refusing this user a right the store needs (CONNECT, CREATE on the
                         database, making it); a SQLite file locked by another process, its
                         disk full, read-only, or found damaged by a write (a run going on)

A rights problem is one class, whatever the moment it shows (connecting, making the database,
DBOS's schema), as chat memory's store has it: the store is fine, its user may not use it yet.
"""

from __future__ import annotations

import errno
import os
import shlex
import sqlite3
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict

from agent.memory.postgres_database import create_database, not_made
from agent.url_credentials import driver_said

from ..errors import StoreError, StoreUnavailable
from ..store_config import redacted, without_credentials_of

__all__ = ["DAMAGED", "NO_FOLDER", "READ_ONLY", "open_failure", "store_failure"]

READ_ONLY = (
    "it is read-only here: make it writable (or name another store with --store or --state-dir)"
)
_SQLITE_NOW = {
    "database is locked": "another process holds its write lock (a `sqlite3` shell, a backup?):"
    " try again once it lets go",
    "database or disk is full": "free some space on its disk",
    "attempt to write a readonly database": READ_ONLY,
    "disk i/o error": "its disk failed a write",
}
"""SQLite's words for a store that cannot be written now (not a bad store), and what to do."""
_OS_NOW = {
    errno.EROFS: READ_ONLY,
    errno.EACCES: READ_ONLY,
    errno.EPERM: READ_ONLY,
    errno.ENOSPC: "free some space on its disk",
}
"""What to do when the file or its directory cannot be made."""
_DAMAGED = "database disk image is malformed"
DAMAGED = (
    "the file is damaged: restore it from a backup, or name another store with --store or "
    "--state-dir (`sqlite3 {file} .recover` saves what it can)"
)
"""What to do with a SQLite store whose file is damaged (SQLite's `_DAMAGED`)."""
NO_FOLDER = (
    "its directory {folder} does not exist, and cannot be made in {parent}: name another store "
    "with --store or --state-dir (or run with --no-store: keep no record)"
)
"""What to do when the store's directory is missing and cannot be made (HOME=/nonexistent):
that it is read-only would not be true of it."""
_INSUFFICIENT_PRIVILEGE = "42501"


def store_failure(url: str, exc: BaseException, *, doing: str = "open") -> StoreError:
    """One line saying why the store at `url` cannot be used (`doing`: open, write to), as
    `StoreUnavailable` when it cannot be used now (see the module), else `StoreError`."""
    cause = getattr(exc, "orig", None) or exc
    if isinstance(cause, OSError) and cause.strerror:
        first = without_credentials_of(url, cause.strerror)
    else:
        first = driver_said(url, cause)
    if url.startswith(("postgresql:", "postgres:")):
        unavailable, advice = _postgres(url, cause)
    else:
        unavailable, advice = _sqlite(url, cause, first, writing=doing == "write to")
    error = StoreUnavailable if unavailable else StoreError
    said = f"cannot {doing} the run store {redacted(url)}: {first}"
    return error(f"{said}: {advice}" if advice is not None else said)


async def open_failure(url: str, exc: BaseException) -> StoreError:
    """`store_failure` of a store that could not be opened; a PostgreSQL database that does
    not exist says why it was not made (DBOS tried, and keeps the reason to itself)."""
    failure = store_failure(url, exc)
    if isinstance(failure, StoreUnavailable) and "does not exist" in str(failure):
        refused = await create_database(url)
        if isinstance(refused, str):
            said = not_made(_database(url), refused)
            return StoreUnavailable(f"cannot open the run store {redacted(url)}: {said}")
    return failure


def _sqlite(
    url: str, cause: BaseException, first: str, *, writing: bool
) -> tuple[bool, str | None]:
    if isinstance(cause, sqlite3.DatabaseError) and first.lower() == _DAMAGED:
        # A write that finds it damaged fails a run that went well until then (exit 1).
        return writing, DAMAGED.format(file=shlex.quote(url.removeprefix("sqlite:///")))
    if isinstance(cause, OSError):
        advice = _OS_NOW.get(cause.errno or 0)
        folder = Path(url.removeprefix("sqlite:///")).parent
        if advice == READ_ONLY and not folder.is_dir():
            parent = next(p for p in folder.parents if p.is_dir())  # the root, at worst
            advice = NO_FOLDER.format(folder=folder, parent=parent)
        return advice is not None, advice
    if not isinstance(cause, sqlite3.OperationalError):
        return False, None
    advice = _SQLITE_NOW.get(first.lower())
    if advice is None and first == "unable to open database file":
        # SQLite's words for any file it cannot open: on a read-only filesystem too, where
        # the write-ahead log's side files cannot be made.
        advice = READ_ONLY if _not_writable(Path(url.removeprefix("sqlite:///"))) else None
    return advice is not None, advice


def _not_writable(file: Path) -> bool:
    """Whether `file` (or, if it is missing, its directory) cannot be written by this process,
    or its directory (where SQLite makes its -wal and -shm files) cannot: read-only."""
    place = file.parent
    if not place.is_dir():
        return False  # missing: another failure
    return not os.access(place, os.W_OK) or (file.exists() and not os.access(file, os.W_OK))


def _postgres(url: str, cause: BaseException) -> tuple[bool, str | None]:
    """Unreachable (any of psycopg's `OperationalError`s: refused, shut down, too many
    clients, ...) or refused a right: the store cannot be used now."""
    said = str(cause)
    name, user = _database(url), _user(url)
    if "permission denied for database" in said:
        right = "CONNECT" if "CONNECT privilege" in said else "CREATE"
        why = "" if right == "CONNECT" else ", for DBOS's schema `dbos`"
        grant = f"GRANT {right} ON DATABASE {_quoted(name)} TO {user}"
        return True, f"its user needs the {right} right on it{why}: `{grant}` as its owner"
    if getattr(cause, "sqlstate", None) == _INSUFFICIENT_PRIVILEGE:
        return True, f"grant {user} the rights DBOS needs in database {name!r}, as its owner"
    return isinstance(cause, psycopg.OperationalError), None


def _database(url: str) -> str:
    return str(conninfo_to_dict(url).get("dbname") or "")


def _user(url: str) -> str:
    user = conninfo_to_dict(url).get("user")
    return _quoted(str(user)) if user else "its user"


def _quoted(name: str) -> str:
    """`name` as SQL writes an identifier (quoted unless plain lower-case)."""
    plain = name.isidentifier() and name == name.lower() and name.isascii()
    return name if plain else '"' + name.replace('"', '""') + '"'
