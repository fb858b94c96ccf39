"""Two fronts timed call by call against each other: a change weighed to ~0.5 %.

    python -m bench paired --against SIDE [--base SIDE] [--protocol modern|auto] [--calls 1500]
                           [--warmup 300] [--blob N] [--clients N [--turn 16]] [--asking [legacy|modern]]
                           [--pause MS]

A SIDE is a checkout of this repository (a directory: `agent-gateway serve --http` with
`expose_tools = true` on that code), `direct` (no front: the driver calls the downstream) or
`floor-bare` (uvicorn with a bare forwarding app, `peers/floors.py`: what any Python front
costs). `--base` is this checkout by default.

Rounds of separate runs cannot weigh a change of 1-2 % on a shared host: what the host does
between them moves every figure by more (bench/RESULTS.md, item 34). Here both sides stand in
front of one benchmark downstream over HTTP, and one driver (the mcp `Client`, a session to
each) calls `echo` (200 B; `--blob N`: `blob`, N bytes) through them in turn, one call at a
time, the order swapped every pair; so whatever the host does falls on both alike. With
`--clients N` each side has N clients, and the sides take turns in blocks of calls (`--turn`
from each of its clients at once; a turn ends with fewer calls in flight, which blunts the
calls/s of short turns): the load of the throughput workloads. Printed per side: p50,
p90, mean, the front's CPU per call (user + system, from the process) and the calls per second
while it had its turns; and the ratios of `--against` to `--base`. Two fronts of the same code
come out within 0.3-0.5 % of each other on p50 and CPU with one client.

The driver's sessions declare nothing by default, as the peer benchmark's do. `--asking` makes
them what most desktop clients open: a 2025-era session (`mode="legacy"`) that declares roots,
so its servers may ask it during a call; `--asking modern`: 2026-07-28 clients that declare
roots (as the SDK's `Client` does given a roots callback), asked in input-required rounds.

`--pause MS` leaves the host quiet for MS after each turn, as `bench peers` leaves each front
idle while the other arms take their calls: code that runs after a process sat idle runs
slower (bench/RESULTS.md, item 54), and this weighs how much slower, side against side.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import READY, cpu_seconds, running  # noqa: E402
from bench.downstream import READY as DOWNSTREAM_READY  # noqa: E402
from bench.downstream import blob_text  # noqa: E402

GATEWAY = str(Path(sys.executable).parent / "agent-gateway")
FLOORS = str(REPO / "bench" / "peers" / "floors.py")
FLOOR_READY = "bench-floor: serving on "
NAMED_SIDES = ("direct", "floor-bare")


@dataclass
class _Side:
    name: str
    """A checkout's path, or one of `NAMED_SIDES`."""
    latencies: list[float] = field(default_factory=list[float])
    cpu_seconds: float = 0.0
    busy_seconds: float = 0.0
    """Time its turns took: calls per second."""

    @property
    def ours(self) -> bool:
        return self.name not in NAMED_SIDES

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


def _side(text: str) -> str:
    """`text` as a side: a named one, or a checkout whose code a front started on it runs."""
    if text in NAMED_SIDES:
        return text
    where = Path(text).resolve()
    found = subprocess.run(
        [sys.executable, "-c", "import gateway; print(gateway.__file__)"],
        env={"PYTHONPATH": str(where), "PATH": ""},
        cwd="/",  # not this checkout, which `-c` would put first
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    if not found.startswith(f"{where}/"):
        raise SystemExit(f"error: {text}: not a checkout of agent-gateway ({found or 'none'})")
    return str(where)


def _cpu(pid: int | None) -> float:
    return 0.0 if pid is None else cpu_seconds(pid)


@asynccontextmanager
async def _front(
    side: _Side, downstream: str, config: Path
) -> AsyncGenerator[tuple[str, int | None]]:
    """The URL the driver calls for `side`, and the process of its front (none for direct)."""
    if side.name == "direct":
        yield downstream, None
        return
    if side.name == "floor-bare":
        command, ready, env = [sys.executable, FLOORS, "bare", downstream], FLOOR_READY, {}
    else:
        command = [GATEWAY, "serve", "--http", "127.0.0.1:0", "--config", str(config)]
        ready, env = READY, {"PYTHONPATH": side.name}
    async with running(command, ready=ready, env=env) as front:
        yield front.url, front.pid


async def run(
    base: str,
    against: str,
    *,
    protocol: str,
    calls: int,
    warmup: int,
    blob: int,
    clients: int = 1,
    per_turn: int = 16,
    asking: str = "",
    pause: float = 0.0,
) -> tuple[_Side, _Side]:
    from mcp import Client
    from mcp_types import ListRootsResult

    async def no_roots(_ctx: object) -> ListRootsResult:
        return ListRootsResult(roots=[])

    declared: dict[str, Any] = {"list_roots_callback": no_roots} if asking else {}
    if asking == "legacy":
        declared["mode"] = "legacy"

    tool, arguments = ("blob", {"n": blob}) if blob else ("echo", {"message": "x" * 200})
    expected = blob_text(blob) if blob else arguments["message"]
    sides = (_Side(base), _Side(against))
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
        pids: list[int | None] = []
        sessions: list[Sequence[Client]] = []
        for side in sides:
            url, pid = await stack.enter_async_context(
                _front(side, f"{downstream.url}/mcp", config)
            )
            pids.append(pid)
            sessions.append(
                [await stack.enter_async_context(Client(url, **declared)) for _ in range(clients)]
            )

        async def call(client: Client, side: _Side | None, name: str) -> None:
            started = time.perf_counter()
            result = await client.call_tool(name, arguments)
            if side is not None:
                side.latencies.append(time.perf_counter() - started)
            text = getattr(result.content[0], "text", None) if result.content else None
            if result.is_error or text != expected:
                raise SystemExit(f"error: a call through a front failed: {result}")

        async def turn(k: int, each: int, timed: bool) -> None:
            """`each` calls from every client of side `k` at once; timed: counted."""
            side = sides[k]
            name = f"d__{tool}" if side.ours else tool
            counted = side if timed else None
            cpu, started = _cpu(pids[k]), time.perf_counter()

            async def client_calls(client: Client) -> None:
                for _ in range(each):
                    await call(client, counted, name)

            if clients == 1:
                await client_calls(sessions[k][0])
            else:
                async with anyio.create_task_group() as tg:
                    for client in sessions[k]:
                        tg.start_soon(client_calls, client)
            if timed:
                side.busy_seconds += time.perf_counter() - started
                side.cpu_seconds += _cpu(pids[k]) - cpu
            if pause:  # as while the other arms of `bench peers` take their calls
                await anyio.sleep(pause)

        # Turns alternate between the sides, the order swapped every pair: one call from the
        # one client, or a few from each of `clients` at once.
        each = 1 if clients == 1 else per_turn
        for i in range(max(1, warmup // (each * clients))):
            for k in (0, 1) if i % 2 else (1, 0):
                await turn(k, each, timed=False)
        for i in range(max(1, calls // (each * clients))):
            for k in (0, 1) if i % 2 else (1, 0):
                await turn(k, each, timed=True)
    return sides


def _report(sides: tuple[_Side, _Side], what: str) -> None:
    a, b = (side.summary() for side in sides)
    print(what)
    print(
        f"{'side':<8} {'p50 ms':>8} {'p90 ms':>8} {'mean ms':>8} {'CPU ms/call':>12} {'calls/s':>8}"
    )
    for label, row, side in (("base", a, sides[0]), ("against", b, sides[1])):
        cpu = f"{row['cpu']:12.3f}" if side.name != "direct" else f"{'-':>12}"
        print(
            f"{label:<8} {row['p50']:8.3f} {row['p90']:8.3f} {row['mean']:8.3f}"
            f" {cpu} {row['calls/s']:8.1f}  {side.name}"
        )
    ratios = {key: (b[key] / a[key] if a[key] and b[key] else None) for key in a}
    shown = [f"{ratio:7.3f}x" if ratio is not None else f"{'-':>8}" for ratio in ratios.values()]
    print(f"{'ratio':<8} {' '.join(shown[:3])} {shown[3]:>12} {shown[4]:>8}  (against / base)")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench paired", description=__doc__)
    parser.add_argument("--base", default=str(REPO), help="default: this checkout")
    parser.add_argument("--against", required=True, help="a checkout, direct or floor-bare")
    parser.add_argument("--protocol", choices=["modern", "auto"], default="modern")
    parser.add_argument("--calls", type=int, default=1500, help="calls through each side")
    parser.add_argument("--warmup", type=int, default=300, help="calls before the timing")
    parser.add_argument("--blob", type=int, default=0, help="call blob(N) instead of the echo")
    parser.add_argument(
        "--clients", type=int, default=1, help="concurrent clients per side (turns in blocks)"
    )
    parser.add_argument(
        "--turn", type=int, default=16, help="with --clients: calls from each client per turn"
    )
    parser.add_argument(
        "--pause", type=float, default=0.0, help="ms of quiet after each turn (not timed)"
    )
    parser.add_argument(
        "--asking",
        nargs="?",
        const="legacy",
        default="",
        choices=["legacy", "modern"],
        help="sessions that declare roots: 2025-era (the default) or 2026-07-28 clients",
    )
    options = parser.parse_args()
    base, against = _side(options.base), _side(options.against)
    sides = anyio.run(
        lambda: run(
            base,
            against,
            protocol=options.protocol,
            calls=options.calls,
            warmup=options.warmup,
            blob=options.blob,
            clients=options.clients,
            per_turn=options.turn,
            asking=options.asking,
            pause=options.pause / 1000,
        ),
        backend_options={"use_uvloop": True},
    )
    what = f"blob({options.blob})" if options.blob else "echo"
    load = "one client" if options.clients == 1 else f"{options.clients} clients at once"
    if options.asking:
        era = "2025-era sessions" if options.asking == "legacy" else "2026-07-28 clients"
        load += f", {era} declaring roots"
    calls = len(sides[0].latencies)
    if options.pause:
        load += f", {options.pause:g} ms quiet after each turn"
    _report(sides, f"{calls} {what} calls through each side ({load}), {options.protocol}")


if __name__ == "__main__":
    main()
