"""A SQLite run store that another process locks while a run executes (a `sqlite3` shell in a
`BEGIN IMMEDIATE`): the gateway says so once, naming the process, DBOS's retries stay quiet,
and the run waits `[store] unreachable_wait` for it: let go in time, the run goes on; held
longer, it stops (exit 1), resumable; Ctrl-C stops it at once. Was: DBOS retried for ever,
its warnings every half minute, and a Ctrl-C took 20 s."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import sqlite3
import threading
from collections.abc import Generator
from contextlib import closing, contextmanager
from pathlib import Path

import anyio
import pytest

from gateway.durable.sqlite_lock import LockWait
from tests.durable.cli_runs import TwoCalls, cli, stop_run

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(120)]

HOLDER = f"process {os.getpid()} ("
"""How the runs name the holder of the lock: this test's process (then its program)."""
LOCKED = f"is locked by {HOLDER}"


class Setup(TwoCalls):
    """`TwoCalls` on a SQLite store, which another connection can lock."""

    def __init__(self, directory: Path, wait: float) -> None:
        self.file = directory / "runs.sqlite3"
        super().__init__(directory, f"sqlite:///{self.file}", wait)

    @contextmanager
    def locked(self) -> Generator[None]:
        """Another connection holds the store's write lock, as a `sqlite3` shell would."""
        with closing(sqlite3.connect(self.file, isolation_level=None)) as other:
            other.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                other.execute("ROLLBACK")


def _quiet(err: str) -> None:
    """The lock is said once, by the gateway: none of DBOS's warnings, no traceback."""
    assert err.count(LOCKED) == 1, err
    assert " dbos:" not in err, err  # DBOS logs as `WARNING dbos: ...`
    assert "database is locked" not in err, err
    assert "Traceback" not in err, err


async def test_a_store_let_go_within_the_wait_lets_the_run_go_on(tmp_path: Path) -> None:
    setup = Setup(tmp_path, wait=60)
    run = await setup.start()
    try:
        with setup.locked():
            await setup.release()
            await run.until(LOCKED)
            assert "): runs here wait up to 60 s for it ([store] unreachable_wait)" in run.err
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert (code, out) == (0, "A and B are done\n"), run.err
    assert "can be written again after" in run.err
    _quiet(run.err)
    assert sorted(setup.calls()) == ["end A", "end B", "start A", "start B"]


async def test_a_store_held_longer_stops_the_run_which_resumes_once_let_go(
    tmp_path: Path,
) -> None:
    setup = Setup(tmp_path, wait=3)
    run = await setup.start()
    try:
        with setup.locked():
            await setup.release()
            await run.until(LOCKED)
            with anyio.fail_after(20):  # the wait, and a look every half second
                code, _ = await run.finish()
    finally:
        await stop_run(run)
    assert code == 1, run.err
    error = re.search(
        rf"error: cannot write to the run store {re.escape(setup.store)}: its write lock was "
        rf"held for 3 s by {re.escape(HOLDER)}[^)]+\): try again once it lets go\n",
        run.err,
    )
    assert error is not None, run.err
    hint = re.search(r"the run is stored: agent-gateway resume (\w+) --store (\S+)\n", run.err)
    assert hint is not None, run.err
    _quiet(run.err)

    setup.gate.unlink()
    resumed = cli("resume", hint[1], "--store", setup.store, "--model", setup.second, "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["output"] == "A and B are done"
    calls = setup.calls()
    assert (calls.count("start A"), calls.count("end A")) == (1, 1)  # recorded: not again
    # B ended while the store was locked: its record never made it, so it runs again.
    assert (calls.count("start B"), calls.count("end B")) == (2, 2)


async def test_ctrl_c_stops_a_run_waiting_for_a_locked_store_at_once(tmp_path: Path) -> None:
    setup = Setup(tmp_path, wait=60)
    run = await setup.start()
    try:
        with setup.locked():
            await setup.release()
            await run.until(LOCKED)
            run.process.send_signal(signal.SIGINT)
            with anyio.fail_after(5):  # was: 20 s (the stop timeout, then DBOS's threads)
                code, _ = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130, run.err
    assert re.search(r"interrupted: run \w+ is stored: agent-gateway resume", run.err), run.err
    _quiet(run.err)


async def test_a_lock_this_process_holds_to_delete_old_runs_is_not_blamed_on_another(
    tmp_path: Path,
) -> None:
    """A run's write that meets the lock while this process deletes old runs ([store]
    keep_days) says so. Was: `locked by another process (a sqlite3 shell, a backup?)`, with
    no other process there (`serve`'s own startup prune)."""
    file = tmp_path / "runs.sqlite3"
    with closing(sqlite3.connect(file)) as db:
        db.execute("CREATE TABLE t (x)")
    url = f"sqlite:///{file}"
    wait = LockWait(url, 30)
    said: list[str] = []
    told = threading.Event()

    class Heard(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())
            told.set()

    heard = Heard()
    logging.getLogger("gateway.durable.sqlite_lock").addHandler(heard)
    try:
        with closing(sqlite3.connect(file, isolation_level=None)) as deleting:
            deleting.execute("BEGIN IMMEDIATE")  # this process's batch of deletions
            with wait.busy_here("the runs that finished more than 30 days ago"):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(anyio.to_thread.run_sync, wait.locked)  # a run's write
                    assert await anyio.to_thread.run_sync(told.wait, 30)
                    deleting.execute("COMMIT")  # the batch ends: the write goes on
    finally:
        logging.getLogger("gateway.durable.sqlite_lock").removeHandler(heard)
    assert said[0] == (
        f"the run store {url} is locked while this process deletes the runs that finished "
        "more than 30 days ago ([store] keep_days, a batch at a time): runs here wait for it, "
        "up to 30 s"
    )
    assert said[1].startswith(f"the run store {url} can be written again after ")
