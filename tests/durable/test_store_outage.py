"""A PostgreSQL run store that goes down while a run executes (its server stopped, for real):
the gateway says so once, DBOS's retries stay quiet, and the run waits `[store]
unreachable_wait` for it: back in time, the run goes on; gone for longer, it stops (exit 1)
and resumes later with every recorded call answered from its record; Ctrl-C stops it at once."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from gateway.durable.outage import Outage, watching
from gateway.errors import StoreUnavailable
from tests.durable.cli_runs import TwoCalls, cli, start_run, stop_run
from tests.durable.said import Said, listening
from tests.servers.databases import PostgresCluster

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

UNREACHABLE = "is unreachable (connection failed: "


@pytest.fixture
def said() -> Iterator[Said]:
    with listening("gateway.durable.outage") as handler:
        yield handler


def dbos_retry(outage: Outage, said: Said) -> tuple[bool, list[str]]:
    """What DBOS's `db_retry` does after a failed connection, in its thread: asks whether to
    retry (then sleeps its backoff, and retries); and what the watch had said by the answer."""
    return bool(outage), list(said.lines)


class Setup(TwoCalls):
    """`TwoCalls` on a PostgreSQL store of `pg_cluster`."""

    def __init__(self, directory: Path, pg_cluster: PostgresCluster, wait: float) -> None:
        super().__init__(directory, f"{pg_cluster.url.rsplit('/', 1)[0]}/runs", wait)


def _quiet(err: str) -> None:
    """The outage is said once, by the gateway: none of DBOS's warnings, no traceback."""
    assert err.count("the run store") <= 3, err  # unreachable, (back | gave up), the hint
    assert err.count(UNREACHABLE) == 1, err
    assert " dbos:" not in err, err  # DBOS logs as `WARNING dbos: ...`
    assert "Traceback" not in err, err


async def test_a_store_that_comes_back_within_the_wait_lets_the_run_go_on(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster, wait=60)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(pg_cluster.stop)
        await run.until(UNREACHABLE)
        assert "runs here wait up to 60 s for it ([store] unreachable_wait)" in run.err
        await setup.release()
        await anyio.to_thread.run_sync(pg_cluster.start)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert (code, out) == (0, "A and B are done\n"), run.err
    assert "is reachable again after" in run.err
    _quiet(run.err)
    assert sorted(setup.calls()) == ["end A", "end B", "start A", "start B"]


async def test_dbos_retries_once_the_store_is_seen_back_and_after_the_line_saying_so(
    pg_cluster: PostgresCluster, said: Said
) -> None:
    # Was: the retry went on at once, to sleep DBOS's backoff (1 s doubling, to 60 s): a store
    # back in seconds was retried up to a minute later, or the run ended before the line.
    outage, gave_up = Outage(pg_cluster.url, wait=60), list[StoreUnavailable]()
    answered: list[tuple[bool, list[str]]] = []
    with anyio.fail_after(40):
        async with watching(outage, gave_up.append), anyio.create_task_group() as tg:
            await anyio.to_thread.run_sync(pg_cluster.stop)

            async def retry() -> None:
                answered.append(await anyio.to_thread.run_sync(dbos_retry, outage, said))

            tg.start_soon(retry)
            await said.until(UNREACHABLE)
            assert not answered  # it waits while the store is away
            assert outage  # asked on the watching loop itself, it does not wait (nor deadlock)
            await anyio.to_thread.run_sync(pg_cluster.start)
    [(retried, lines)] = answered
    assert retried
    assert "is reachable again after" in lines[-1], lines
    assert not gave_up


async def test_dbos_retries_raise_at_once_when_the_wait_is_over(
    pg_cluster: PostgresCluster, said: Said
) -> None:
    outage, gave_up = Outage(pg_cluster.url, wait=1), list[StoreUnavailable]()
    async with watching(outage, gave_up.append):
        await anyio.to_thread.run_sync(pg_cluster.stop)
        with anyio.fail_after(10):  # the wait, and a look a second
            retried, _ = await anyio.to_thread.run_sync(dbos_retry, outage, said)
        assert not retried  # DBOS raises: the run stops
        assert len(gave_up) == 1
        assert not outage  # and so do its retries from now on, until the store is back


async def test_a_store_that_stays_away_stops_the_run_which_resumes_once_it_is_back(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster, wait=2)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(pg_cluster.stop)
        await run.until(UNREACHABLE)
        await setup.release()
        with anyio.fail_after(20):  # the wait, and a look a second
            code, _ = await run.finish()
    finally:
        await stop_run(run)
    assert code == 1, run.err
    error = f"error: the run store {setup.store} was unreachable for 2 s: connection failed: "
    assert error in run.err
    hint = re.search(r"the run is stored: agent-gateway resume (\w+) --store (\S+)\n", run.err)
    assert hint is not None, run.err
    assert hint[2] == setup.store
    _quiet(run.err)

    await anyio.to_thread.run_sync(pg_cluster.start)
    setup.gate.unlink()
    resumed = cli("resume", hint[1], "--store", setup.store, "--model", setup.second, "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["output"] == "A and B are done"
    assert [s["observation"] for s in result["steps"]] == ["A done", "B done"]
    calls = setup.calls()
    assert (calls.count("start A"), calls.count("end A")) == (1, 1)  # recorded: not again
    # B ended while the store was away: its record never made it, so it runs again.
    assert (calls.count("start B"), calls.count("end B")) == (2, 2)


async def test_ctrl_c_stops_a_run_waiting_for_its_store_at_once(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster, wait=60)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(pg_cluster.stop)
        await run.until(UNREACHABLE)
        await setup.release()
        run.process.send_signal(signal.SIGINT)
        with anyio.fail_after(5):  # was: the stop timeout (10 s), then DBOS's retries
            code, _ = await run.finish()
    finally:
        await stop_run(run)
    assert code == 130, run.err
    assert re.search(r"interrupted: run \w+ is stored: agent-gateway resume", run.err), run.err
    _quiet(run.err)


async def test_run_json_of_a_run_the_store_stopped_says_what_it_did_so_far(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster, wait=2)
    run = await start_run(
        "use both",
        "--json",
        "--config",
        str(setup.config),
        "--store",
        setup.store,
        "--model",
        setup.first,
    )
    try:
        await run.until("gated: waiting for B", "recorded tool 0 a")
        await anyio.to_thread.run_sync(pg_cluster.stop)
        await run.until(UNREACHABLE)
        await setup.release()
        with anyio.fail_after(20):  # the wait, and a look a second
            code, out = await run.finish()
    finally:
        await stop_run(run)
    assert code == 1, run.err
    shown = json.loads(out)
    assert shown["status"] == "stopped"
    # Was: null, null and [], the store being away; the process knows them.
    assert shown["usage"] is not None, shown
    assert shown["usage"]["requests"] == 1, shown
    assert shown["iterations"] == 1, shown
    # A, recorded before the outage, as the process knew it; not B, whose record was not
    # written (was [], the checkpoint being from before the calls).
    assert [(s["call_id"], s["observation"]) for s in shown["steps"]] == [("a", "A done")]
