"""Load through proxy mode: many clients at once, for a while, and the gateway holds.

50 clients (half 2025-11-25 sessions, half 2026-07-28) call server-everything's `echo`
through a real `agent-gateway serve --http` process, each checking its own answers. Warm-up
ends when every client has made `WARMUP_CALLS` calls; then the load runs `SECONDS` more.
Every call must succeed and the gateway's RSS at the end must be within 10 % of what it was
after warm-up. CI runs 8 s; the full run is `AGENT_GATEWAY_LOAD_SECONDS=30`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.server.processes import http_server
from tests.servers.real import everything_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.integration, pytest.mark.slow]

CLIENTS = int(os.environ.get("AGENT_GATEWAY_LOAD_CLIENTS", "50"))
SECONDS = float(os.environ.get("AGENT_GATEWAY_LOAD_SECONDS", "8"))
WARMUP_CALLS = 10


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


@dataclass
class Load:
    clients: int
    warm: anyio.Event = field(default_factory=anyio.Event)
    over: anyio.Event = field(default_factory=anyio.Event)
    deadline: float = math.inf
    calls: int = 0
    calls_after_warmup: int = 0
    warmed_up: int = 0
    errors: list[str] = field(default_factory=list[str])
    rss_kib: list[int] = field(default_factory=list[int])
    """The gateway's RSS after warm-up and at the end."""
    elapsed: float = 0.0

    async def client(self, url: str, number: int) -> None:
        mode = "legacy" if number % 2 else "auto"
        made = 0
        async with Client(url, mode=mode) as client:
            while anyio.current_time() < self.deadline:
                text = f"client {number} call {made}"
                try:
                    result = await client.call_tool("everything__echo", {"message": text})
                except Exception as exc:  # counted: the test fails on any
                    self.errors.append(f"{mode} {number}: {exc!r}")
                    continue
                finally:
                    made += 1
                answer = result.content[0] if result.content else None
                if (
                    result.is_error
                    or not isinstance(answer, types.TextContent)
                    or text not in answer.text
                ):
                    self.errors.append(f"{mode} {number}: {result.model_dump_json()[:200]}")
                self.calls += 1
                if self.warm.is_set():
                    self.calls_after_warmup += 1
                elif made == WARMUP_CALLS:
                    self.warmed_up += 1
                    if self.warmed_up == self.clients:
                        self.warm.set()
            self.over.set()  # the first client past the deadline ends the measurement


@pytest.mark.timeout(SECONDS * 2 + 120)
async def test_fifty_clients_through_proxy_mode_get_every_answer_and_rss_holds(
    tmp_path: Path,
) -> None:
    everything = everything_stdio()
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.everything]\ncommand = {json.dumps(everything.command)}\n"
        f'args = {json.dumps(everything.args)}\ninclude = ["echo"]\n'
    )
    load = Load(CLIENTS)
    async with http_server(config) as served, anyio.create_task_group() as tg:
        pid = served.process.pid
        for number in range(CLIENTS):
            tg.start_soon(load.client, served.url, number)
        with anyio.fail_after(60):
            await load.warm.wait()
        load.rss_kib.append(rss_kib(pid))
        started = anyio.current_time()
        load.deadline = started + SECONDS
        with anyio.fail_after(SECONDS + 60):
            await load.over.wait()
        load.rss_kib.append(rss_kib(pid))
        load.elapsed = anyio.current_time() - started
    warm_rss, end_rss = load.rss_kib
    elapsed = load.elapsed
    rate = load.calls_after_warmup / elapsed
    print(
        f"\n{CLIENTS} clients, {elapsed:.1f} s after warm-up: {load.calls_after_warmup} calls "
        f"({rate:.0f}/s), {load.calls} in all, {len(load.errors)} errors; gateway RSS "
        f"{warm_rss / 1024:.1f} MiB after warm-up, {end_rss / 1024:.1f} MiB at the end "
        f"({(end_rss - warm_rss) / warm_rss:+.1%})"
    )
    assert load.errors == []
    assert end_rss <= warm_rss * 1.10
