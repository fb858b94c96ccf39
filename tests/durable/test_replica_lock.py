"""A process's lock on a PostgreSQL store (its sign of life to the other replicas) outlives
its connection: taken again when the server restarts or the session is ended under it; and
when another process took it first meanwhile, the runs here are told they go on there."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator

import anyio
import psycopg
import pytest

from gateway.durable.lock import HeldLock, staying_alive
from gateway.durable.replicas import alive
from tests.durable.said import Said, listening
from tests.servers.databases import PostgresCluster

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(120)]

HELD_AGAIN = "holds its lock on the store again"


@pytest.fixture
def said() -> Iterator[Said]:
    with listening("gateway.durable.lock", logging.INFO) as handler:
        yield handler


def replica() -> str:
    return f"agent-gateway-replica-{uuid.uuid4().hex}"


def never() -> None:
    raise AssertionError("nobody else took the lock")


async def test_the_lock_is_taken_again_when_the_server_restarts(
    pg_cluster: PostgresCluster, said: Said
) -> None:
    # Was: the lock went with its connection for good; the other replicas took this live
    # one's runs over (on another machine, each run then executed twice).
    own = replica()
    async with staying_alive(pg_cluster.url, own, superseded=never) as lock:
        assert lock.settled
        await anyio.to_thread.run_sync(pg_cluster.stop)
        await said.until("lost the store connection holding")
        assert not lock.settled
        await anyio.to_thread.run_sync(pg_cluster.start)
        await said.until(HELD_AGAIN, within=30)
        assert await alive(pg_cluster.url, own)
        # Just taken again: the others may be taking theirs, so no run is taken over yet.
        assert not lock.settled
    assert not await alive(pg_cluster.url, own)  # released at the block's end


async def test_a_lock_taken_by_another_meanwhile_supersedes_the_runs_here(
    pg_cluster: PostgresCluster, said: Said
) -> None:
    """The session holding the lock ended under it (an idle-session timeout, an operator),
    and another process found the lock free: it is taking the runs here over."""
    own, superseded = replica(), anyio.Event()
    async with staying_alive(pg_cluster.url, own, superseded=superseded.set) as lock:
        async with await psycopg.AsyncConnection.connect(pg_cluster.url, autocommit=True) as other:
            await other.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks"
                " WHERE locktype = 'advisory' AND granted"
            )
            # Queued at once: granted as the ended session's lock goes, before the retake.
            await other.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (own,))
            with anyio.fail_after(30):
                await superseded.wait()
            assert lock.held_since is None
            assert any("took " + own + "'s runs over" in line for line in said.lines)
        # The other's session ended, its lock with it: this process holds its own again.
        await said.until(HELD_AGAIN, within=30)
        assert isinstance(lock, HeldLock)
        assert await alive(pg_cluster.url, own)
