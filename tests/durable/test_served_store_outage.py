"""A served agent's PostgreSQL run store that stays away for longer than `[store]
unreachable_wait` (its server stopped, for real): the run stops, its client is told it
stopped (not that it failed), and the serving process takes the run up again once the store
is back, since no one else may while it lives: the run finishes, and a decision on its
waiting call is taken. Real `serve --http` processes, real SDK clients over HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.durable.cli_runs import script_model, tool_call
from tests.server.processes import Served, http_server
from tests.servers.databases import PostgresCluster

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.timeout(180)]

STOPPED_FOR_STORE = "stopped: the run store "


class Setup:
    """`worker` calls the gated tool A; `payer` calls B, which needs a person's approval."""

    def __init__(self, directory: Path, pg_cluster: PostgresCluster) -> None:
        self.store = f"{pg_cluster.url.rsplit('/', 1)[0]}/runs"
        self.log, self.gate = directory / "calls.log", directory / "gate"
        os.mkfifo(self.gate)
        gated = tool_call("gated", "a", log=str(self.log), name="A", gate=str(self.gate))
        worker = script_model(directory / "w.json", {"tool_calls": [gated]}, {"content": "A done"})
        paying = tool_call("guarded", "b", log=str(self.log), name="B")
        payer = script_model(directory / "p.json", {"tool_calls": [paying]}, {"content": "B done"})
        self.config = directory / "agent-gateway.toml"
        self.config.write_text(
            f'[store]\nurl = "{self.store}"\nunreachable_wait = 2\n'
            '[tools.gated]\npython = "tests.durable_tools:gated"\n'
            '[tools.guarded]\npython = "tests.durable_tools:logged"\n'
            f'[agents.worker]\nmodel = "{worker}"\ntools = ["gated"]\n'
            f'[agents.payer]\nmodel = "{payer}"\ntools = ["guarded"]\n'
            'require_approval = ["guarded"]\n'
        )

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines()


async def said(served: Served, text: str) -> str:
    """The first line of the gateway's log containing `text`, once there is one."""
    while True:
        more = served.more_stderr
        found = next((line for line in served.stderr if text in line), None)
        if found is not None:
            return found
        assert not served.stderr_closed.is_set(), f"never said {text!r}: {served.stderr}"
        await more.wait()


def text_of(result: types.CallToolResult) -> str:
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def test_a_served_run_the_store_stopped_goes_on_once_the_store_is_back(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster)
    async with (
        http_server(setup.config, "-v") as served,
        Client(served.url, mode="legacy") as client,
    ):
        results: list[types.CallToolResult] = []
        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    results.append(await client.call_tool("worker", {"prompt": "use A"}))

                tg.start_soon(call)
                await said(served, "gated: waiting for A")
                await anyio.to_thread.run_sync(pg_cluster.stop)
                await said(served, "is unreachable (")
                # A ends; its record waits for the store, which stays away past the wait.
                await anyio.to_thread.run_sync(lambda: open(setup.gate, "w").close())
        # Was: "agent 'worker' failed: the run store postgresql://... (run ...)", and the run
        # stayed `running` for as long as the gateway lived, with nothing running it.
        [result] = results
        assert result.is_error
        assert text_of(result).startswith("agent 'worker' stopped: "), text_of(result)
        run_id = text_of(result).split("Run ", 1)[1].split(" ", 1)[0]
        assert text_of(result) == (
            f"agent 'worker' stopped: the gateway's run store became unreachable. Run {run_id} "
            "is stored where it stopped, and goes on in the gateway once the store is back: "
            "get_run gives its answer."
        )
        stopped = await said(served, f"run {run_id} stopped: the run store ")
        assert f"agent-gateway runs resume {run_id} --store {setup.store})" in stopped, stopped

        setup.gate.unlink()
        await anyio.to_thread.run_sync(pg_cluster.start)
        with anyio.fail_after(60):
            await said(served, f"run {run_id} (taken up again) finished")
        report = await client.call_tool("get_run", {"run_id": run_id})
        assert not any("Traceback" in line for line in served.stderr), served.stderr
    assert report.structured_content is not None
    assert report.structured_content["status"] == "succeeded", report
    assert text_of(report) == "A done"
    # A ended while the store was away: its record never made it, so it ran again.
    assert setup.calls() == ["start A", "end A", "start A", "end A"]


async def test_a_call_waiting_for_approval_is_decided_after_the_store_stopped_its_run(
    tmp_path: Path, pg_cluster: PostgresCluster
) -> None:
    setup = Setup(tmp_path, pg_cluster)
    async with (
        http_server(setup.config, "-v") as served,
        Client(served.url, mode="legacy") as client,
    ):
        with anyio.fail_after(60):
            handle = await client.call_tool("payer", {"prompt": "pay"})
            assert handle.structured_content is not None, handle
            run_id = handle.structured_content["run"]["run_id"]
            await anyio.to_thread.run_sync(pg_cluster.stop)
            await said(served, f"run {run_id} stopped: the run store ")
            await anyio.to_thread.run_sync(pg_cluster.start)
            await said(served, "is reachable again after")
            # Was: "busy elsewhere (running)", then "no call waits for approval", and B never
            # ran while the gateway lived.
            approved = await client.call_tool("approve_run", {"run_id": run_id})
    assert not approved.is_error, text_of(approved)
    assert text_of(approved) == "B done"
    assert setup.calls() == ["start B", "end B"]
