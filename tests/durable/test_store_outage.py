"""A PostgreSQL run store that goes down while a run executes (its server stopped, for real):
the gateway says so once, DBOS's retries stay quiet, and the run waits `[store]
unreachable_wait` for it: back in time, the run goes on; gone for longer, it stops (exit 1)
and resumes later with every recorded call answered from its record; Ctrl-C stops it at once."""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.durable.cli_runs import Run, cli, script_model, start_run, stop_run, tool_call
from tests.servers.databases import PostgresCluster, postgres_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

TOOLS = (
    '[tools.logged]\npython = "tests.durable_tools:logged"\n'
    '[tools.gated]\npython = "tests.durable_tools:gated"\n'
)
UNREACHABLE = "is unreachable (connection failed: "


@pytest.fixture
def cluster() -> Iterator[PostgresCluster]:
    with postgres_cluster() as started:
        yield started


class Setup:
    """A run of two tool calls at once: A ends (recorded), B waits at its gate."""

    def __init__(self, directory: Path, cluster: PostgresCluster, wait: float) -> None:
        self.store = f"{cluster.url.rsplit('/', 1)[0]}/runs"
        self.log, self.gate = directory / "calls.log", directory / "gate"
        os.mkfifo(self.gate)
        self.config = directory / "agent-gateway.toml"
        self.config.write_text(f"[store]\nunreachable_wait = {wait}\n{TOOLS}")
        both = [
            tool_call("logged", "a", log=str(self.log), name="A"),
            tool_call("gated", "b", log=str(self.log), name="B", gate=str(self.gate)),
        ]
        self.first = script_model(
            directory / "first.json", {"tool_calls": both}, {"content": "A and B are done"}
        )
        self.second = script_model(directory / "second.json", {"content": "A and B are done"})

    async def start(self) -> Run:
        run = await start_run(
            "use both", "--config", str(self.config), "--store", self.store, "--model", self.first
        )
        await run.until("gated: waiting for B", "recorded tool 0 a")
        return run

    async def release(self) -> None:
        """B ends: its record is what waits for the store now."""
        await anyio.to_thread.run_sync(lambda: open(self.gate, "w").close())

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


def _quiet(err: str) -> None:
    """The outage is said once, by the gateway: none of DBOS's warnings, no traceback."""
    assert err.count("the run store") <= 3, err  # unreachable, (back | gave up), the hint
    assert err.count(UNREACHABLE) == 1, err
    assert " dbos:" not in err, err  # DBOS logs as `WARNING dbos: ...`
    assert "Traceback" not in err, err


async def test_a_store_that_comes_back_within_the_wait_lets_the_run_go_on(
    tmp_path: Path, cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, cluster, wait=60)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(cluster.stop)
        await run.until(UNREACHABLE)
        assert "runs here wait up to 60 s for it ([store] unreachable_wait)" in run.err
        await setup.release()
        await anyio.to_thread.run_sync(cluster.start)
        code, out = await run.finish()
    finally:
        await stop_run(run)
    assert (code, out) == (0, "A and B are done\n"), run.err
    assert "is reachable again after" in run.err
    _quiet(run.err)
    assert sorted(setup.calls()) == ["end A", "end B", "start A", "start B"]


async def test_a_store_that_stays_away_stops_the_run_which_resumes_once_it_is_back(
    tmp_path: Path, cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, cluster, wait=2)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(cluster.stop)
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

    await anyio.to_thread.run_sync(cluster.start)
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
    tmp_path: Path, cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, cluster, wait=60)
    run = await setup.start()
    try:
        await anyio.to_thread.run_sync(cluster.stop)
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
