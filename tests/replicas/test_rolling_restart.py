"""A replica told to go (SIGTERM, a rolling restart) behind a real nginx in round robin with
the README's block (nginx's default retries): the calls that come while it drains are taken
by the other replica, none refused, and its call in flight still finishes there."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.servers.databases import free_port
from toolkits import result_text

from .cluster import cluster, config

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(120)]

TOOLS = '[tools.gated]\npython = "tests.durable_tools:gated"\n'
NEW_CALLS = 6


def _open_gate(gate: Path) -> None:
    with gate.open("wb"):  # the waiting call reads to the end once this closes
        pass


async def test_calls_made_while_a_replica_drains_are_taken_by_the_other(tmp_path: Path) -> None:
    log, gate = tmp_path / "calls.log", tmp_path / "gate"
    os.mkfifo(gate)
    port = free_port()
    path = config(tmp_path, port, TOOLS, gateway="expose_tools = true")
    held: list[types.CallToolResult] = []
    new: list[types.CallToolResult] = []
    async with cluster(path, port, retries=True) as gateways:

        async def call_held() -> None:
            async with (
                gateways.http() as http,
                Client(streamable_http_client(gateways.url, http_client=http)) as client,
            ):
                arguments = {"log": str(log), "name": "H", "gate": str(gate)}
                held.append(await client.call_tool("gated", arguments))

        async with (
            gateways.http() as http,
            Client(streamable_http_client(gateways.url, http_client=http)) as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(call_held)
            with anyio.fail_after(30):
                leaving = await gateways.saying("gated: waiting for H")
            [staying] = [r for r in gateways.replicas if r is not leaving]
            since = len(gateways.answered_by)
            leaving.process.send_signal(signal.SIGTERM)
            with anyio.fail_after(10):
                await leaving.said("agent-gateway: stopping")
                # Its held call keeps it draining: round robin sends it every other request.
                for i in range(NEW_CALLS):
                    arguments = {"log": str(log), "name": f"N{i}", "gate": str(tmp_path / "no")}
                    new.append(await client.call_tool("gated", arguments))
            answered = [a for _, a in gateways.answered_by[since:]]  # the held call's to come
            assert leaving.process.returncode is None  # still draining: the calls came in time
            await anyio.to_thread.run_sync(_open_gate, gate)
            with anyio.fail_after(30):
                assert await leaving.process.wait() == 128 + signal.SIGTERM
            # Every request since was answered by the staying replica (the calls, the SDK's
            # listing), some after nginx's connect to the leaving one was refused (it stopped
            # listening: the request was never sent there).
            assert {a.split(", ")[-1] for a in answered} == {staying.address}
            assert f"{leaving.address}, {staying.address}" in answered
            assert not [x for x in leaving.lines if "Traceback" in x or "ERROR" in x]
    assert [result_text(r) for r in new] == [f"N{i} done" for i in range(NEW_CALLS)]
    assert [result_text(r) for r in held] == ["H done"]
