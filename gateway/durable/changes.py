"""When a run last changed, read from DBOS's system tables.

DBOS's `updated_at` of a workflow moves with its status only: a run that goes on (its calls
recorded, its checkpoints written, a decision sent to it or taken, another replica taking it
over) stays PENDING, so its `updated_at` stays when it began. What did change is in the
run's step records (`operation_outputs`, when each ended: every call, checkpoint, event and
decision taken is one) and its messages (`notifications`, a decision sent): the newest of
those is when it last changed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Sequence
from contextlib import closing, contextmanager
from typing import Any, LiteralString

import psycopg

from .replicas import on_postgres
from .store_failures import store_failure

__all__ = ["last_changes", "system_rows"]

Row = tuple[Any, ...]
_BATCH = 500
"""Run ids per query: SQLite's older builds take at most 999 parameters."""
_CHANGES = (
    "SELECT workflow_uuid, max(completed_at_epoch_ms) FROM {schema}operation_outputs "
    "WHERE workflow_uuid IN ({ids}) GROUP BY workflow_uuid "
    "UNION ALL SELECT destination_uuid, max(created_at_epoch_ms) FROM {schema}notifications "
    "WHERE destination_uuid IN ({ids}) GROUP BY destination_uuid"
)
"""DBOS's system tables are in the schema `dbos` on PostgreSQL (we never name another)."""


def last_changes(url: str, run_ids: Sequence[str]) -> dict[str, int]:
    """When each run last changed (epoch ms), by run id, for those with a step or a message
    recorded. Raises `StoreError` if the store cannot be read."""
    postgres = on_postgres(url)
    changed: dict[str, int] = {}
    with _reading(url) as read:
        for start in range(0, len(run_ids), _BATCH):
            batch = run_ids[start : start + _BATCH]
            marks = ", ".join("%s" if postgres else "?" for _ in batch)
            query = _CHANGES.format(schema="dbos." if postgres else "", ids=marks)
            for run_id, at_ms in read(query, (*batch, *batch)):
                if isinstance(run_id, str) and isinstance(at_ms, int):
                    changed[run_id] = max(at_ms, changed.get(run_id, at_ms))
    return changed


def system_rows(url: str, query: LiteralString, arguments: Sequence[object]) -> list[Row]:
    """The rows `query` reads from the store's DBOS system tables. Raises `StoreError` if
    the store cannot be read."""
    with _reading(url) as read:
        return read(query, arguments)


@contextmanager
def _reading(url: str) -> Generator[Callable[[LiteralString, Sequence[object]], list[Row]]]:
    """A reader of the store's system tables over one connection (SQLite's read-only)."""
    try:
        if on_postgres(url):
            with psycopg.connect(url, autocommit=True) as connection:
                yield lambda query, arguments: connection.execute(query, arguments).fetchall()  # pyright: ignore[reportArgumentType]
            return
        path = url.removeprefix("sqlite:///")
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
            yield lambda query, arguments: connection.execute(query, arguments).fetchall()
    except (psycopg.Error, sqlite3.Error) as exc:
        raise store_failure(url, exc) from None
