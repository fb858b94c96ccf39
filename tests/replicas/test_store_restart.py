"""The PostgreSQL server under two replicas restarts while one of them runs a run: each takes
its lock again, and the other does not take the live replica's run over (it would run its
calls a second time)."""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.servers.databases import PostgresCluster, free_port
from tests.servers.openai_stub import openai_stub

from .cluster import cluster, config, runs_json

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

HELD_AGAIN = "holds its lock on the store again"


async def test_a_store_restart_leaves_each_run_with_its_live_replica(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    store = f"{pg_cluster.url.rsplit('/', 1)[0]}/runs"
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    os.mkfifo(gate)
    gated = {"name": "gated", "arguments": {"log": str(log), "name": "A", "gate": str(gate)}}
    body = (
        '[tools.gated]\npython = "tests.durable_tools:gated"\n'
        '[agents.assistant]\nmodel = "{model}"\ntools = ["gated"]\n'
    )
    port = free_port()
    answers: list[str] = []
    answered = anyio.Event()
    said: list[str] = []
    with openai_stub([gated, "A is done"]) as model:
        path = config(tmp_path, port, body.replace("{model}", model.spec), store=store)
        async with cluster(path, port) as gateways:

            async def call() -> None:
                async with (
                    gateways.http() as http,
                    Client(streamable_http_client(gateways.url, http_client=http)) as client,
                ):
                    with suppress(Exception):  # the answers are what is checked
                        result = await client.call_tool("assistant", {"prompt": "use A"})
                        answers.extend(str(getattr(c, "text", c)) for c in result.content)
                answered.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(call)
                with anyio.fail_after(60):
                    running = await gateways.saying("gated: waiting for A")
                [other] = [r for r in gateways.replicas if r is not running]
                await anyio.to_thread.run_sync(pg_cluster.stop)
                await anyio.to_thread.run_sync(pg_cluster.start)
                with anyio.fail_after(60):
                    await running.said(HELD_AGAIN)
                    await other.said(HELD_AGAIN)
                # Any takeover would have come in the moment before the retakes: it would
                # have made the call again on `other`, which would now wait at the gate too.
                await anyio.to_thread.run_sync(lambda: open(gate, "w").close())
                with anyio.fail_after(60):
                    await answered.wait()
                said = other.lines
    assert answers == ["A is done"]
    assert log.read_text().splitlines() == ["start A", "end A"]
    # No takeover ("replica X died: run Y goes on here"); a look for dead replicas' runs
    # that met the restart ("looking for the runs of replicas that died failed") is none.
    assert not any("died: run" in line for line in said), said
    [run] = runs_json(store)
    assert run["status"] == "succeeded"
