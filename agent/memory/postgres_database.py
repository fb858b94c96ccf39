"""Making the PostgreSQL database a store's URL names, as DBOS makes the run store's: through
the server's `postgres` database. Chat memory's store and the run store's failure message
both use it, so a user who may not make it is told the same thing by both.
"""

from __future__ import annotations

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..url_credentials import driver_said

__all__ = ["create_database", "database_missing", "not_made"]


async def create_database(url: str) -> bool | str:
    """Make the database `url` names: True if it is made now (here, or by another process
    meanwhile); False if it exists already, or the server could not be asked; else why the
    server refused, in its own words (credentials masked)."""
    name = _name(url)
    try:
        async with await _admin(url) as admin:
            if not name or await _exists(admin, name):
                return False
            await admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.errors.DuplicateDatabase:
        return True
    except psycopg.Error as exc:
        if getattr(exc, "sqlstate", None) is None:
            return False  # not the server's refusal: it could not be asked
        return driver_said(url, exc)
    return True


async def database_missing(url: str) -> bool:
    """Whether the server says that the database `url` names does not exist (False when it
    cannot be asked): what a failed connection to it means, which libpq does not tell apart."""
    name = _name(url)
    try:
        async with await _admin(url) as admin:
            return bool(name) and not await _exists(admin, name)
    except psycopg.Error:
        return False


def _name(url: str) -> str:
    return str(conninfo_to_dict(url).get("dbname") or "")


async def _admin(url: str) -> psycopg.AsyncConnection[tuple[object, ...]]:
    """A connection to the server of `url` through its `postgres` database."""
    return await psycopg.AsyncConnection.connect(
        make_conninfo(url, dbname="postgres"), autocommit=True, connect_timeout=5
    )


async def _exists(admin: psycopg.AsyncConnection[tuple[object, ...]], name: str) -> bool:
    found = await admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
    return await found.fetchone() is not None


def not_made(name: str, refused: str) -> str:
    """What to say of database `name` that does not exist and could not be made."""
    return (
        f"database {name!r} does not exist, and creating it failed ({refused}): create it "
        f"(`createdb {name}`, or CREATE DATABASE as its owner)"
    )
