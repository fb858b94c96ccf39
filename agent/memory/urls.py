"""Choosing a store by URL, as config files do.

memory://                        in this process only (gone when it exits)
sqlite:///relative/file.db       a SQLite file (four slashes for an absolute path:
sqlite:////var/lib/gw/memory.db  SQLAlchemy's convention)
postgresql://user@host:5432/db   PostgreSQL (psycopg 3; `postgres://` too)
redis://host:6379/0              Redis (`rediss://` for TLS)
"""

from __future__ import annotations

from pathlib import Path

from ..errors import MemoryStoreError
from .base import SessionStore
from .in_process import InProcessStore
from .sqlite_store import SQLiteStore

__all__ = ["STORE_URL_FORMS", "store_from_url", "store_url_problem"]

STORE_URL_FORMS = ("memory://", "sqlite:///FILE", "postgresql://...", "redis://...")


def store_from_url(url: str, *, base: Path | None = None) -> SessionStore:
    """The store `url` names; a relative SQLite path is relative to `base` (default: cwd).

    Raises `MemoryStoreError` for an unknown scheme, or a driver that is not installed.
    """
    problem = store_url_problem(url)
    if problem is not None:
        raise MemoryStoreError(problem)
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "memory":
        return InProcessStore()
    if scheme == "sqlite":
        path = Path(rest[1:])
        if not path.is_absolute() and base is not None:
            path = base / path
        return SQLiteStore(path)
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres_store import PostgresStore
        except ImportError as exc:
            raise _missing("PostgreSQL", "psycopg[binary]>=3.2", exc) from exc  # a dependency
        return PostgresStore(url)
    try:
        from .redis_store import RedisStore
    except ImportError as exc:
        raise _missing("Redis", "agent-gateway[redis]", exc) from exc
    return RedisStore(url)


def store_url_problem(url: str) -> str | None:
    """Why `url` names no store `store_from_url` makes (an unknown scheme, a SQLite URL
    without a file), or None; it looks at the URL alone (no driver, no file)."""
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if sep and scheme in ("memory", "postgresql", "postgres", "redis", "rediss", "unix"):
        return None
    if sep and scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            return f"a SQLite memory URL names a file: sqlite:///FILE, not {url!r}"
        return None
    shown = url.split("://", 1)[0]  # what may follow is a secret
    forms = ", ".join(STORE_URL_FORMS)
    return f"unknown memory URL scheme {shown!r}; expected one of: {forms}"


def _missing(what: str, install: str, exc: ImportError) -> MemoryStoreError:
    return MemoryStoreError(f"{what} memory needs its driver: pip install '{install}' ({exc})")
