"""Two checkouts' fronts timed call by call against each other: a change weighed to ~0.5 %.

    python -m bench paired --against DIR [--base DIR] [--protocol modern|auto] [--calls 1500]
                           [--warmup 300] [--blob N] [--clients N]

Rounds of separate runs cannot weigh a change of 1-2 % on a shared host: what the host does
between them moves every figure by more (bench/RESULTS.md, item 34). Here two fronts (`agent-
gateway serve --http` with `expose_tools = true`, one on the code in `--base`, this checkout by
default, one on the code in `--against`) stand in front of one benchmark downstream over HTTP,
and one driver (the mcp `Client`, a session to each) calls `d__echo` (200 B; `--blob N`:
`d__blob`, N bytes) through them in turn, one call at a time, the order swapped every pair; so
whatever the host does falls on both alike. With `--clients N`, each front has N clients, and
the fronts take turns in blocks of calls (four from each of its clients at once): the load of
the throughput workloads, where a call waits on others. Printed per front: p50, p90, mean, its
CPU per call (user + system, from the process) and its calls per second while it had its
turns; and the ratios of `--against` to `--base`. Two fronts of the same code come out within
0.3-0.5 % of each other on p50 and CPU with one client.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import READY, running  # noqa: E402
from bench.downstream import READY as DOWNSTREAM_READY  # noqa: E402
from bench.downstream import blob_text  # noqa: E402

GATEWAY = str(Path(sys.executable).parent / "agent-gateway")
_CALLS_PER_CLIENT_AND_BLOCK = 4


@dataclass
class _Front:
    checkout: Path
    latencies: list[float] = field(default_factory=list[float])
    cpu_seconds: float = 0.0
    busy_seconds: float = 0.0
    """Time its blocks of calls took (`--clients`): calls per second under that load."""

    def summary(self) -> dict[str, float]:
        ordered = sorted(self.latencies)
        calls = len(ordered)
        return {
            "p50": statistics.median(ordered) * 1e3,
            "p90": ordered[int(calls * 0.9)] * 1e3,
            "mean": statistics.fmean(ordered) * 1e3,
            "cpu": self.cpu_seconds / calls * 1e3,
            "calls/s": calls / self.busy_seconds,
        }


def _checked(checkout: Path) -> Path:
    """`checkout`, once its code is what a front started with it imports."""
    where = checkout.resolve()
    found = subprocess.run(
        [sys.executable, "-c", "import gateway; print(gateway.__file__)"],
        env={"PYTHONPATH": str(where), "PATH": ""},
        cwd="/",  # not this checkout, which `-c` would put first
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not found.startswith(str(where) + "/"):
        raise SystemExit(f"error: {checkout}: not a checkout of agent-gateway ({found or 'none'})")
    return where


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


async def run(
    base: Path,
    against: Path,
    *,
    protocol: str,
    calls: int,
    warmup: int,
    blob: int,
    clients: int = 1,
) -> tuple[_Front, _Front]:
    from mcp import Client

    tool, arguments = ("d__blob", {"n": blob}) if blob else ("d__echo", {"message": "x" * 200})
    expected = blob_text(blob) if blob else arguments["message"]
    fronts = (_Front(base), _Front(against))
    async with AsyncExitStack() as stack:
        downstream = await stack.enter_async_context(
            running(
                [sys.executable, str(REPO / "bench" / "downstream.py"), "--http"],
                ready=DOWNSTREAM_READY,
            )
        )
        config = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "gateway.toml"
        config.write_text(
            f'[gateway]\nexpose_tools = true\n[mcpServers.d]\nurl = "{downstream.url}/mcp"\n'
            f'protocol = "{protocol}"\n'
        )
        pids: list[int] = []
        sessions: list[list[Client]] = []
        for front in fronts:
            served = await stack.enter_async_context(
                running(
                    [GATEWAY, "serve", "--http", "127.0.0.1:0", "--config", str(config)],
                    ready=READY,
                    env={"PYTHONPATH": str(front.checkout)},
                )
            )
            pids.append(served.pid)
            sessions.append(
                [await stack.enter_async_context(Client(served.url)) for _ in range(clients)]
            )

        async def call(client: Client, front: _Front | None) -> None:
            started = time.perf_counter()
            result = await client.call_tool(tool, arguments)
            if front is not None:
                front.latencies.append(time.perf_counter() - started)
            text = getattr(result.content[0], "text", None) if result.content else None
            if result.is_error or text != expected:
                raise SystemExit(f"error: a call through a front failed: {result}")

        async def block(k: int, each: int, timed: bool) -> None:
            """`each` calls from every client of front `k` at once; timed: counted."""
            front = fronts[k] if timed else None
            cpu, started = _cpu(pids[k]), time.perf_counter()

            async def client_calls(client: Client) -> None:
                for _ in range(each):
                    await call(client, front)

            if clients == 1:
                await client_calls(sessions[k][0])
            else:
                async with anyio.create_task_group() as tg:
                    for client in sessions[k]:
                        tg.start_soon(client_calls, client)
            if timed:
                fronts[k].busy_seconds += time.perf_counter() - started
                fronts[k].cpu_seconds += _cpu(pids[k]) - cpu

        # Blocks of calls alternate between the fronts, the order swapped every pair: one call
        # from the one client, or a few from each of `clients` at once.
        each = 1 if clients == 1 else _CALLS_PER_CLIENT_AND_BLOCK
        for i in range(max(1, warmup // (each * clients))):
            for k in (0, 1) if i % 2 else (1, 0):
                await block(k, each, timed=False)
        for i in range(max(1, calls // (each * clients))):
            for k in (0, 1) if i % 2 else (1, 0):
                await block(k, each, timed=True)
    return fronts


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench paired", description=__doc__)
    parser.add_argument("--base", type=Path, default=REPO, help="default: this checkout")
    parser.add_argument("--against", type=Path, required=True, help="the other checkout")
    parser.add_argument("--protocol", choices=["modern", "auto"], default="modern")
    parser.add_argument("--calls", type=int, default=1500, help="calls through each front")
    parser.add_argument("--warmup", type=int, default=300, help="calls before the timing")
    parser.add_argument("--blob", type=int, default=0, help="call blob(N) instead of the echo")
    parser.add_argument(
        "--clients", type=int, default=1, help="concurrent clients per front (blocks of calls)"
    )
    options = parser.parse_args()
    base, against = _checked(options.base), _checked(options.against)
    fronts = anyio.run(
        lambda: run(
            base,
            against,
            protocol=options.protocol,
            calls=options.calls,
            warmup=options.warmup,
            blob=options.blob,
            clients=options.clients,
        ),
        backend_options={"use_uvloop": True},
    )
    a, b = (front.summary() for front in fronts)
    what = f"blob({options.blob})" if options.blob else "echo"
    load = "one client" if options.clients == 1 else f"{options.clients} clients at once"
    print(
        f"{len(fronts[0].latencies)} {what} calls through each front ({load}), {options.protocol}"
    )
    print(
        f"{'front':<10} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8} {'CPU ms/call':>12} {'calls/s':>8}"
    )
    for name, row, front in (("base", a, fronts[0]), ("against", b, fronts[1])):
        print(
            f"{name:<10} {row['p50']:8.3f} {row['p90']:8.3f} {row['mean']:8.3f}"
            f" {row['cpu']:12.3f} {row['calls/s']:8.1f}  {front.checkout}"
        )
    ratios = {key: b[key] / a[key] for key in a}
    print(
        f"{'ratio':<10} {ratios['p50']:7.3f}x {ratios['p90']:7.3f}x {ratios['mean']:7.3f}x"
        f" {ratios['cpu']:11.3f}x {ratios['calls/s']:7.3f}x  (against / base)"
    )


if __name__ == "__main__":
    main()
