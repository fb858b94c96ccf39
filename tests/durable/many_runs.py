"""Many runs in a store, fast: each a copy of a real run's rows (of every DBOS table that
keeps something of a run), under a new id. Written directly, only to fill the store: every
read of them goes through the gateway."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from typing import Any, LiteralString

import psycopg

__all__ = ["cloned", "sqlite_file"]

_TABLES: dict[LiteralString, LiteralString] = {
    "workflow_status": "workflow_uuid",  # first: the others' rows refer to it
    "workflow_input": "workflow_uuid",
    "workflow_output": "workflow_uuid",
    "operation_outputs": "workflow_uuid",
    "workflow_events": "workflow_uuid",
    "workflow_events_history": "workflow_uuid",
    "notifications": "destination_uuid",
    "streams": "workflow_uuid",
}
"""DBOS's tables with a run's rows, and the column naming the run."""


def sqlite_file(url: str) -> str | None:
    return url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None


def cloned(url: str, template: str, count: int, *, prefix: str) -> list[str]:
    """`count` copies of run `template` in the store at `url`, with the ids `prefix`0,
    `prefix`1, ...: those ids."""
    ids = [f"{prefix}{n}" for n in range(count)]
    file = sqlite_file(url)
    if file is not None:
        with closing(sqlite3.connect(file)) as db, db:
            db.execute("CREATE TEMP TABLE ids (id TEXT)")
            db.executemany("INSERT INTO ids VALUES (?)", [(i,) for i in ids])
            for table, key in _TABLES.items():
                columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
                db.execute(_copy("", table, key, columns, "ids", "?"), (template,))
        return ids
    with psycopg.connect(url) as db:
        for table, key in _TABLES.items():
            found = db.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'dbos'"
                " AND table_name = %s ORDER BY ordinal_position",
                (table,),
            ).fetchall()
            columns = [str(row[0]) for row in found]
            ids_table = "unnest(%s::text[]) AS ids (id)"
            db.execute(_copy("dbos.", table, key, columns, ids_table, "%s"), (ids, template))
    return ids


def _copy(
    schema: LiteralString,
    table: LiteralString,
    key: LiteralString,
    columns: Sequence[str],
    ids: LiteralString,
    mark: LiteralString,
) -> Any:
    """The statement copying the template's rows of `table` once for each id of `ids` (Any:
    psycopg takes only literal text, and the columns' names come from the store)."""
    names = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join(
        "ids.id"
        if c == key
        else "ids.id || '-' || message_uuid"  # its primary key
        if c == "message_uuid"
        else f'"{c}"'
        for c in columns
    )
    return (
        f"INSERT INTO {schema}{table} ({names}) SELECT {values} "
        f"FROM {schema}{table} CROSS JOIN {ids} WHERE {key} = {mark}"
    )
