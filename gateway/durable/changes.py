"""What DBOS's system tables say of runs not ended, read for many runs at once: when each
last changed, its events, the messages sent to it.

DBOS's `updated_at` of a workflow moves with its status only: a run that goes on (its calls
recorded, its checkpoints written, a decision sent to it or taken, another replica taking it
over) stays PENDING, so its `updated_at` stays when it began. What did change is in the
run's step records (`operation_outputs`, when each ended: every call, checkpoint, event and
decision taken is one) and its messages (`notifications`, a decision sent): the newest of
those is when it last changed.

Each kind is one query per `BATCH` runs, all over one connection: read run by run (two
event reads and one of messages each, a new connection to PostgreSQL for each), listing
4,000 runs not ended took 12-28 s.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Generator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from typing import Any, LiteralString

import psycopg

from .replicas import on_postgres
from .store_failures import store_failure

__all__ = ["BATCH", "GoingRecords", "going_records", "last_changes", "system_rows"]

Row = tuple[Any, ...]
BATCH = 500
"""Run ids per statement: SQLite's older builds take at most 999 parameters, PostgreSQL
65,535."""
_CHANGES = (
    "SELECT workflow_uuid, max(completed_at_epoch_ms) FROM {schema}operation_outputs "
    "WHERE workflow_uuid IN ({ids}) GROUP BY workflow_uuid "
    "UNION ALL SELECT destination_uuid, max(created_at_epoch_ms) FROM {schema}notifications "
    "WHERE destination_uuid IN ({ids}) GROUP BY destination_uuid"
)
"""DBOS's system tables are in the schema `dbos` on PostgreSQL (we never name another)."""
_EVENTS = (
    "SELECT workflow_uuid, key, value, serialization FROM {schema}workflow_events "
    "WHERE workflow_uuid IN ({ids}) AND key IN ({keys})"
)
_MESSAGES = (
    "SELECT destination_uuid, message, serialization FROM {schema}notifications "
    "WHERE destination_uuid IN ({ids}) AND topic = {mark} "
    "ORDER BY created_at_epoch_ms, message_uuid"
)


@dataclass(frozen=True, slots=True)
class GoingRecords:
    """What `going_records` read: each as DBOS stores it (a value and its format's name)."""

    changed: dict[str, int] = field(default_factory=dict[str, int])
    """When each run last changed (epoch ms), for those with a step or a message recorded."""
    events: dict[tuple[str, str], Row] = field(default_factory=dict[tuple[str, str], Row])
    """(value, serialization) by (run id, key)."""
    messages: dict[str, list[Row]] = field(default_factory=dict[str, list[Row]])
    """(message, serialization) of each run, oldest first."""


def going_records(
    url: str,
    run_ids: Sequence[str],
    *,
    events: Sequence[LiteralString],
    topic: str,
    changes: bool = True,
) -> GoingRecords:
    """The runs' `events`, their messages on `topic`, and with `changes` when each last
    changed. Raises `StoreError` if the store cannot be read."""
    found = GoingRecords()
    schema, mark = _dialect(url)
    with _reading(url) as read:
        for batch, ids in _batches(run_ids, mark):
            keys = ", ".join(mark for _ in events)
            query = _EVENTS.format(schema=schema, ids=ids, keys=keys)
            for run_id, key, *value in read(query, (*batch, *events)):
                found.events[run_id, key] = tuple(value)
            query = _MESSAGES.format(schema=schema, ids=ids, mark=mark)
            for run_id, *message in read(query, (*batch, topic)):
                found.messages.setdefault(run_id, []).append(tuple(message))
            if changes:
                _changes(read, batch, ids, schema, found.changed)
    return found


def last_changes(url: str, run_ids: Sequence[str]) -> dict[str, int]:
    """When each run last changed (epoch ms), by run id, for those with a step or a message
    recorded. Raises `StoreError` if the store cannot be read."""
    changed: dict[str, int] = {}
    schema, mark = _dialect(url)
    with _reading(url) as read:
        for batch, ids in _batches(run_ids, mark):
            _changes(read, batch, ids, schema, changed)
    return changed


def _dialect(url: str) -> tuple[LiteralString, LiteralString]:
    """The schema of DBOS's tables (as a prefix) and the mark of a parameter, in the store."""
    return ("dbos.", "%s") if on_postgres(url) else ("", "?")


def _batches(
    run_ids: Sequence[str], mark: LiteralString
) -> Generator[tuple[Sequence[str], LiteralString]]:
    """`run_ids` `BATCH` at a time, each with the marks of its parameters."""
    for start in range(0, len(run_ids), BATCH):
        batch = run_ids[start : start + BATCH]
        yield batch, ", ".join(mark for _ in batch)


def _changes(
    read: Callable[[LiteralString, Sequence[object]], list[Row]],
    batch: Sequence[str],
    ids: LiteralString,
    schema: LiteralString,
    changed: dict[str, int],
) -> None:
    for run_id, at_ms in read(_CHANGES.format(schema=schema, ids=ids), (*batch, *batch)):
        if isinstance(run_id, str) and isinstance(at_ms, int):
            changed[run_id] = max(at_ms, changed.get(run_id, at_ms))


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
