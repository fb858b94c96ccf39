"""Choosing a store by URL, as config files do.

memory://                        in this process only (gone when it exits)
sqlite:///relative/file.db       a SQLite file (four slashes for an absolute path:
sqlite:////var/lib/gw/memory.db  SQLAlchemy's convention)
postgresql://user@host:5432/db   PostgreSQL (psycopg 3; `postgres://` too)
redis://host:6379/0              Redis (`rediss://` for TLS)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import MemoryDriverMissing, MemoryStoreError
from .base import SessionStore
from .in_process import InProcessStore
from .sqlite_store import SQLiteStore

__all__ = ["STORE_URL_FORMS", "store_from_url", "store_identity", "store_url_problem"]

STORE_URL_FORMS = ("memory://", "sqlite:///FILE", "postgresql://...", "redis://...")


def store_from_url(url: str, *, base: Path | None = None) -> SessionStore:
    """The store `url` names; a relative SQLite path is relative to `base` (default: cwd).

    Raises `MemoryStoreError` for an unknown scheme, `MemoryDriverMissing` for a driver that
    is not installed.
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


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1", "[::1]", "localhost.localdomain"})


def store_identity(url: str, *, base: Path | None = None, users: bool = True) -> str:
    """What names the store `url` names, however it is spelled: its SQLite file's resolved
    path; its server (this machine's loopback names as one, and for PostgreSQL its socket
    too, which serves the same port), database and user (a user may
    see other tables, or keys: its own schema, an ACL), not the password; `url` itself
    otherwise. Two URLs of one identity are one store: one object, one set of session
    locks. Without `users`, the server and database alone: what may hold the same tables
    whoever reads them (for `keep_days`, where counting two as one deletes less, never more)."""
    scheme, _, rest = url.partition("://")
    scheme = scheme.lower()
    if scheme == "sqlite":
        path = Path(rest[1:])
        if not path.is_absolute():
            path = (base or Path.cwd()) / path
        return f"sqlite:{path.resolve()}"
    if scheme in ("postgresql", "postgres"):
        import psycopg  # a dependency of the package
        from psycopg.conninfo import conninfo_to_dict

        try:
            info = conninfo_to_dict(url)
        except psycopg.ProgrammingError:  # a malformed one: its use will say why
            return url
        host = _host(_pg_host(info))
        user = str(info.get("user") or "")
        database = str(info.get("dbname") or user)
        user = user if users else ""
        options = f"?options={info['options']}" if info.get("options") else ""
        return f"postgresql://{user}@{host}:{info.get('port') or 5432}/{database}{options}"
    if scheme in ("redis", "rediss"):
        parts = urlsplit(url)
        query = parse_qs(parts.query)
        try:
            port = parts.port or 6379
        except ValueError:
            return url
        database = parts.path.strip("/") or (query.get("db") or ["0"])[0]
        user = (parts.username or "") if users else ""
        return f"redis://{user}@{_host(parts.hostname or '')}:{port}/{database}"
    return url


def _pg_host(info: dict[str, Any]) -> str:
    """The host libpq connects to; a Unix socket's directory (`host=/run/postgresql`, and an
    empty host, libpq's default socket) as loopback: the server on this machine that listens
    on that port, as `127.0.0.1` names it."""
    host = str(info.get("host") or info.get("hostaddr") or os.environ.get("PGHOST") or "")
    return "localhost" if not host or host.startswith(("/", "@")) else host


def _host(host: str) -> str:
    host = host.lower()
    return "loopback" if host in _LOOPBACK or host.startswith("127.") else host


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


def _missing(what: str, install: str, exc: ImportError) -> MemoryDriverMissing:
    return MemoryDriverMissing(f"{what} memory needs its driver: pip install '{install}' ({exc})")
