"""This process's writes to its SQLite run store take turns: however many threads write at
once, none meets another's lock in SQLite's busy wait (which, at volume, lost races for
seconds and was said as `locked by another process`); a write that never ends stops those
waiting behind it after `[store] unreachable_wait`. Who holds a store's write lock is named
where Linux tells (`/proc/locks`)."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Generator
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import ExceptionContext

from gateway.durable.sqlite_holder import write_lock_holder
from gateway.durable.sqlite_lock import LockWait
from gateway.errors import StoreUnavailable

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="/proc/locks is Linux's")


def _store(file: Path, wait: float) -> tuple[sa.Engine, LockWait]:
    """An engine on a SQLite file whose connections begin as DBOS's do (`BEGIN IMMEDIATE`
    before a write), bound to a `LockWait`."""
    engine = sa.create_engine(f"sqlite:///{file}")

    def immediate(connection: Any, _record: Any) -> None:
        connection.isolation_level = "IMMEDIATE"

    event.listen(engine, "connect", immediate)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE t (writer INTEGER, n INTEGER)"))
    lock = LockWait(f"sqlite:///{file}", wait)
    lock.bind(engine)
    return engine, lock


def _insert(db: sa.Connection, writer: int, n: int) -> None:
    db.execute(sa.text("INSERT INTO t VALUES (:w, :n)"), {"w": writer, "n": n})


def test_concurrent_writes_of_one_process_never_meet_each_others_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    engine, _ = _store(tmp_path / "runs.sqlite3", 30)
    met: list[str] = []

    def no_busy_wait(connection: Any, *_: Any) -> None:
        # After the store's own: a write meeting another's lock would fail at once.
        connection.execute("PRAGMA busy_timeout = 0")

    def failed(context: ExceptionContext) -> None:
        met.append(str(context.original_exception))

    event.listen(engine, "checkout", no_busy_wait)
    event.listen(engine, "handle_error", failed)

    def writes(writer: int) -> None:
        for n in range(25):
            with engine.begin() as db:  # two statements: the lock held across threads' turns
                _insert(db, writer, n)
                _insert(db, writer, n)

    try:
        with caplog.at_level(logging.WARNING), ThreadPoolExecutor(8) as pool:
            for done in [pool.submit(writes, writer) for writer in range(8)]:
                done.result(timeout=60)
        with engine.connect() as db:
            written = db.execute(sa.text("SELECT count(*) FROM t")).scalar()
    finally:
        engine.dispose()
    assert met == []
    assert caplog.records == []
    assert written == 8 * 25 * 2


def test_a_write_behind_one_that_never_ends_stops_after_the_wait(tmp_path: Path) -> None:
    engine, _ = _store(tmp_path / "runs.sqlite3", 1)
    began, end = threading.Event(), threading.Event()

    def never_ending() -> None:
        with engine.begin() as db:
            _insert(db, 1, 1)
            began.set()
            end.wait(60)

    holder = threading.Thread(target=never_ending)
    holder.start()
    try:
        assert began.wait(30)
        with pytest.raises(StoreUnavailable) as stopped, engine.begin() as db:
            _insert(db, 2, 1)
    finally:
        end.set()
        holder.join(30)
        engine.dispose()
    assert str(stopped.value).startswith(
        f"cannot write to the run store sqlite:///{tmp_path}/runs.sqlite3: its write lock was "
        "held for "
    )
    assert str(stopped.value).endswith(" s by another write of this process, which did not end")


@contextmanager
def _held_elsewhere(file: Path) -> Generator[int]:
    """Another process holds the write lock of `file` (a write-ahead log's) while the block
    runs: its pid."""
    holding = (
        "import sqlite3, sys\n"
        f"db = sqlite3.connect({str(file)!r}, isolation_level=None)\n"
        "db.execute('PRAGMA journal_mode=WAL')\n"
        "db.execute('BEGIN IMMEDIATE')\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    with subprocess.Popen(
        [sys.executable, "-c", holding], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as other:
        try:
            assert other.stdout is not None
            assert other.stdout.readline() == "held\n"
            yield other.pid
        finally:
            other.communicate(timeout=30)


@linux_only
def test_the_holder_of_a_stores_write_lock_is_named(tmp_path: Path) -> None:
    wal = tmp_path / "wal.sqlite3"
    with _held_elsewhere(wal) as pid:
        assert write_lock_holder(str(wal)) == f"process {pid} ({Path(sys.executable).name} -c)"
    assert write_lock_holder(str(wal)) is None  # let go

    journal = tmp_path / "journal.sqlite3"  # no write-ahead log: its RESERVED byte
    with closing(sqlite3.connect(journal, isolation_level=None)) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("BEGIN IMMEDIATE")
        assert write_lock_holder(str(journal)) == "this process"
        assert write_lock_holder(str(journal), locks=str(tmp_path / "none")) is None
        db.execute("ROLLBACK")
    assert os.path.exists(journal)
