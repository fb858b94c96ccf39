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

__all__ = ["STORE_URL_FORMS", "store_from_url"]

STORE_URL_FORMS = ("memory://", "sqlite:///FILE", "postgresql://...", "redis://...")


def store_from_url(url: str, *, base: Path | None = None) -> SessionStore:
    """The store `url` names; a relative SQLite path is relative to `base` (default: cwd).

    Raises `MemoryStoreError` for an unknown scheme, or a driver that is not installed.
    """
    scheme, sep, rest = url.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise _unknown(url)
    if scheme == "memory":
        return InProcessStore()
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise MemoryStoreError(f"a SQLite memory URL names a file: sqlite:///FILE, not {url!r}")
        path = Path(rest[1:])
        if not path.is_absolute() and base is not None:
            path = base / path
        return SQLiteStore(path)
    if scheme in ("postgresql", "postgres"):
        try:
            from .postgres_store import PostgresStore
        except ImportError as exc:
            raise _missing("PostgreSQL", "postgres", exc) from exc
        return PostgresStore(url)
    if scheme in ("redis", "rediss", "unix"):
        try:
            from .redis_store import RedisStore
        except ImportError as exc:
            raise _missing("Redis", "redis", exc) from exc
        return RedisStore(url)
    raise _unknown(url)


def _unknown(url: str) -> MemoryStoreError:
    shown = url.split("://", 1)[0]
    forms = ", ".join(STORE_URL_FORMS)
    return MemoryStoreError(f"unknown memory URL scheme {shown!r}; expected one of: {forms}")


def _missing(what: str, extra: str, exc: ImportError) -> MemoryStoreError:
    return MemoryStoreError(
        f"{what} memory needs its driver: pip install 'agent-gateway[{extra}]' ({exc})"
    )
