"""Opening a run store: DBOS launched for this process (and destroyed on exit), and what a
process that runs workflows keeps up while it does: its lock on a PostgreSQL store
(`lock`), the store's outage watch (`outage`) and the runs it stopped taken up again
(`stranded`), the watch for cancelled runs, a replica's
takeovers (`replicas`) and the pruning of finished runs (`retention`).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from pathlib import Path

import anyio
import sqlalchemy as sa
from dbos import DBOS, DBOSClient, DBOSConfig

from agent.memory import private_sqlite_file, read_only_sqlite

from ..errors import StoreError
from ..run_state import RunOrigin
from ..store_config import check_store_url, default_store_url, redacted, runs_stored
from .dbos_setup import log_through_ours, write_ahead_log
from .endings import cancels_watched
from .lock import staying_alive
from .outage import Outage, noticing, watching
from .record_format import STORED_FORMAT, read_pickled_from_env, reading_pickled
from .replicas import REPLICA_PREFIX, on_postgres, taking_over
from .retention import pruning
from .runs import APP_VERSION, NOTIFICATION_POLL_SECONDS, UNREACHABLE_WAIT, DurableRuns
from .sqlite_lock import LockWait
from .store_failures import open_failure, store_failure
from .store_file import StoreFile, watched
from .stranded import taking_up
from .workflow import WORKFLOW, Host, hosting

__all__ = ["open_runs"]


@asynccontextmanager
async def open_runs(
    url: str | None = None,
    *,
    launch: bool = True,
    replica_every: float | None = None,
    keep_days: float = 0,
    unreachable_wait: float = UNREACHABLE_WAIT,
    read_pickled: bool = False,
    read_only: bool = False,
    origin: RunOrigin | None = None,
) -> AsyncGenerator[DurableRuns]:
    """The store at `url` (default: `default_store_url()`); with `launch`, this process runs
    workflows (DBOS launched, then destroyed on exit), else it only reads and steers them;
    with `read_only` (not `launch`), it only reads: a SQLite store is opened so, also where this
    process may not write it (`agent.memory.read_only_sqlite`: a backup, another user's).
    On PostgreSQL a launched process holds a lock while it lives (`replicas`); with
    `replica_every` (seconds) it is a serving replica and finishes the runs of replicas that
    died (on its config, `origin`: a run started on another is said). With `launch` and `keep_days`, finished runs older than that are deleted in the
    background, from now on and hourly while the store is open (`retention`). With `launch`, runs wait
    `unreachable_wait` seconds for a PostgreSQL store that became unreachable (`outage`), or a
    SQLite store another process locked (`sqlite_lock`), then stop. On exit, the runs executing here are
    interrupted (`stop_all`) before the lock goes. Records in Python's pickle format (an older
    version's) are read only with `read_pickled` or `AGENT_GATEWAY_READ_PICKLED=1`, else
    refused (`PickledRecord`, see `record_format`).

    Raises `StoreError` when the URL names no store, `StoreUnavailable` when its database
    cannot be reached.
    """
    with reading_pickled(read_pickled or read_pickled_from_env()):
        async with _opened(
            url,
            launch=launch,
            replica_every=replica_every,
            keep_days=keep_days,
            unreachable_wait=unreachable_wait,
            read_only=read_only,
            origin=origin,
        ) as runs:
            yield runs


@asynccontextmanager
async def _opened(
    url: str | None,
    *,
    launch: bool,
    replica_every: float | None,
    keep_days: float,
    unreachable_wait: float,
    read_only: bool,
    origin: RunOrigin | None,
) -> AsyncGenerator[DurableRuns]:
    url = check_store_url(url or default_store_url())
    if not launch and not await anyio.to_thread.run_sync(runs_stored, url):
        raise StoreError(f"no runs are stored in {redacted(url)}")
    if url.startswith("sqlite:///"):
        file = Path(url.removeprefix("sqlite:///"))
        try:
            if launch:  # else it exists (runs_stored said so): it is only read
                await anyio.to_thread.run_sync(private_sqlite_file, file, "the run store")
        except OSError as exc:  # its directory read-only, say
            raise store_failure(url, exc) from None
        if launch:
            await anyio.to_thread.run_sync(write_ahead_log, str(file))
    log_through_ours()
    postgres = on_postgres(url)
    replica = postgres and replica_every is not None
    queue = (
        f"{REPLICA_PREFIX if replica else 'agent-gateway-'}{uuid.uuid4().hex}" if launch else None
    )
    outage = Outage(url, unreachable_wait) if postgres and launch else None
    lock_wait = LockWait(url, unreachable_wait) if launch and not postgres else None
    if queue is not None:
        config: DBOSConfig = {
            "name": "agent-gateway",
            "system_database_url": url,
            # Its own id: launching recovers nothing of other processes; `resume` takes a run over.
            "executor_id": queue,
            "application_version": APP_VERSION,
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": NOTIFICATION_POLL_SECONDS,
            "serializer": STORED_FORMAT,
        }
        try:
            dbos = DBOS(config=config)
            DBOS.listen_queues([queue])
            DBOS.launch()
            if outage is not None:
                outage.bound(getattr(dbos, "_sys_db"))  # noqa: B009
            if lock_wait is not None:
                lock_wait.bind(getattr(dbos, "_sys_db").engine)  # noqa: B009
        except Exception as exc:
            DBOS.destroy(destroy_registry=False)
            raise await open_failure(url, exc) from None
    reading = _read_only_engine(url) if read_only and not launch else None
    try:
        if reading is not None:
            client = DBOSClient(system_database_engine=reading, serializer=STORED_FORMAT)
        else:
            client = DBOSClient(system_database_url=url, serializer=STORED_FORMAT)
    except Exception as exc:
        if launch:
            DBOS.destroy(destroy_registry=False)
        if reading is not None:
            reading.dispose()
        raise store_failure(url, exc) from None
    if outage is not None:
        outage.bound(getattr(client, "_sys_db"))  # noqa: B009
    if lock_wait is not None:
        lock_wait.bind(getattr(client, "_sys_db").engine)  # noqa: B009
    host = Host(client, url, outage=outage, lock=lock_wait)
    file = StoreFile(url) if launch and not postgres else None
    runs = DurableRuns(url, host, queue=queue, keep_days=keep_days, file=file)
    with noticing(outage):  # until DBOS is destroyed: its threads log till then
        try:
            async with AsyncExitStack() as stack:
                stack.enter_context(hosting(host))
                if queue is not None:
                    lock = (
                        await stack.enter_async_context(
                            staying_alive(url, queue, superseded=runs.supersede_all)
                        )
                        if postgres
                        else None
                    )
                    if outage is not None:
                        await stack.enter_async_context(watching(outage, runs.stop_for_store))
                        if lock is not None:
                            await stack.enter_async_context(taking_up(runs, lock, outage))
                    if file is not None:
                        await stack.enter_async_context(watched(file, runs.stop_for_store))
                    # On exit: after the watches below stop, before the lock goes.
                    stack.push_async_callback(runs.stop_all)
                    await stack.enter_async_context(cancels_watched(host.executions, host.client))
                    if lock is not None and replica_every is not None:
                        await stack.enter_async_context(
                            taking_over(
                                runs,
                                client,
                                lock,
                                workflow=WORKFLOW,
                                interval=replica_every,
                                origin=origin,
                            )
                        )
                    if keep_days:
                        await stack.enter_async_context(pruning(runs, keep_days))
                yield runs
        finally:
            if lock_wait is not None:
                lock_wait.close()  # DBOS's threads waiting for it stop: it waits for them
            client.destroy()
            if reading is not None:  # the client leaves an engine it was given
                reading.dispose()
            if launch:
                DBOS.destroy(destroy_registry=False)


def _read_only_engine(url: str) -> sa.Engine | None:
    """For a SQLite store, an engine whose connections only read it; None for PostgreSQL."""
    if not url.startswith("sqlite:///"):
        return None
    file = Path(url.removeprefix("sqlite:///"))
    return sa.create_engine(url, creator=partial(read_only_sqlite, file))
