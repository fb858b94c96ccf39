"""Every workload of the peer benchmark, its figures, and where it runs.

`scope`: "main" workloads run on the round's main stacks (memory ones first, while those
processes are fresh), one arm after another; "together" ones on all of them at once, the
arms taking turns call by call or in short turns (`calls.sequential`, `calls.clients`);
"nested" puts a second front of the arm's kind before the main one; "servers" starts its own
fronts (it times their start).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from . import agents, calls, lifecycle
from .measure import Together, Workload
from .sizes import Sizes

__all__ = ["WORKLOADS", "Figure", "WorkloadSpec", "workloads"]


@dataclass(frozen=True)
class Figure:
    key: str
    label: str
    unit: str
    higher_is_better: bool = False
    ratio: bool = True
    """Also shown as a ratio to `direct` from the same round."""


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    title: str
    figures: tuple[Figure, ...]
    run: Workload | Together
    """A `Together` for the "together" scope, else a `Workload`."""
    scope: Literal["main", "together", "nested", "servers"] = "main"


def _ms(key: str, label: str, ratio: bool = True) -> Figure:
    return Figure(key, label, "ms", ratio=ratio)


def workloads(sizes: Sizes) -> tuple[WorkloadSpec, ...]:
    """In the order a round runs them."""
    specs = [
        # Cycles first: the memory of the idle sessions, given back while the cycles run, would
        # read as a fall of the front's RSS (-6 to -8 % after them, +0.8 % on their own).
        WorkloadSpec(
            "cycles",
            f"{sizes.cycles} session open/call/close cycles, {sizes.cycle_workers} at a time "
            f"(handshake era; fewer if {sizes.sessions_budget:g} s run out)",
            (
                Figure("rss_drift_pct", "RSS drift", "%", ratio=False),
                Figure("cycles_per_s", "cycles/s", "/s", higher_is_better=True),
                Figure("cycles", "cycles", "", ratio=False),
            ),
            lifecycle.cycles,
        ),
        WorkloadSpec(
            "idle_sessions",
            f"{sizes.idle_sessions} idle sessions (handshake era; fewer if "
            f"{sizes.sessions_budget:g} s run out)",
            (
                Figure("kb_per_session", "kB per session", "kB", ratio=False),
                Figure("sessions", "sessions", "", ratio=False),
            ),
            lifecycle.idle_sessions,
        ),
        WorkloadSpec(
            "sequential",
            f"{sizes.calls} sequential echo calls (200 B; fewer if {sizes.calls_budget:g} s run "
            "out), the arms taking turns call by call",
            (
                _ms("p50_ms", "p50"),
                _ms("p90_ms", "p90"),
                _ms("p99_ms", "p99"),
                Figure("cpu_ms", "front CPU per call", "ms"),
            ),
            calls.sequential,
            scope="together",
        ),
        WorkloadSpec(
            "asking",
            f"{sizes.asking_calls} sequential echo calls from a 2025-era session that declares "
            "roots (as desktop clients do), the arms taking turns call by call",
            (_ms("p50_ms", "p50"), Figure("cpu_ms", "front CPU per call", "ms")),
            calls.asking("legacy"),
            scope="together",
        ),
        WorkloadSpec(
            "asking_modern",
            f"{sizes.asking_calls} sequential echo calls from the SDK's client given a roots "
            "callback (2026-07-28 where the front speaks it), the arms taking turns call by call",
            (_ms("p50_ms", "p50"), Figure("cpu_ms", "front CPU per call", "ms")),
            calls.asking("auto"),
            scope="together",
        ),
    ]
    for count in sizes.clients:
        specs.append(
            WorkloadSpec(
                f"clients{count}",
                f"{count} concurrent clients, echo, {sizes.seconds:g} s counted in turns of "
                f"{sizes.window:g} s or {sizes.waves} waits, the longer",
                (Figure("calls_per_s", "calls/s", "/s", higher_is_better=True),),
                calls.clients(count),
                scope="together",
            )
        )
    for size, count in sizes.blob_calls:
        mb = f"{size / 1e6:g} MB"
        specs.append(
            WorkloadSpec(
                f"blob{size // 1_000_000}mb",
                f"{mb} results, {count} sequential calls, the arms taking turns call by call",
                (Figure("mb_per_s", "MB/s", "MB/s", higher_is_better=True),),
                calls.blobs(size, count),
                scope="together",
            )
        )
    specs += [
        WorkloadSpec(
            "parallel_sleep",
            f"{sizes.parallel} parallel sleep({sizes.sleep_ms}) from one client",
            (_ms("wall_ms", "wall"),),
            calls.parallel_sleep,
        ),
        WorkloadSpec(
            "agent",
            f"agent run: {sizes.agent_turns} turns x {sizes.agent_fanout} parallel "
            f"sleep({sizes.agent_sleep_ms}) (critical path {sizes.critical_path_ms:g} ms); "
            f"overhead per iteration with {sizes.wide_tools} tools",
            (
                _ms("run_ms", "run"),
                Figure("vs_critical", "run / critical path", "x", ratio=False),
                _ms("overhead_ms", "overhead per iteration", ratio=False),
            ),
            agents.agent,
        ),
        WorkloadSpec(
            "nested",
            "nested hop: echo through two fronts of the same kind",
            (_ms("p50_ms", "p50"),),
            calls.nested,
            scope="nested",
        ),
        WorkloadSpec(
            "servers",
            f"1 vs {sizes.servers} downstream servers x {sizes.tools_per_server} tools, median of "
            f"{sizes.cold_starts} starts",
            (
                _ms("cold1_ms", "cold start, 1", ratio=False),
                _ms("coldn_ms", f"cold start, {sizes.servers}", ratio=False),
                Figure("coldn_x1", f"cold {sizes.servers} / cold 1", "x", ratio=False),
                _ms("warm1_ms", "tools/list, 1"),
                _ms("warmn_ms", f"tools/list, {sizes.servers}"),
                _ms("answered1_ms", "answered, 1"),
                _ms("answeredn_ms", f"answered, {sizes.servers}"),
                Figure("rss1_mb", "RSS, 1", "MB", ratio=False),
                Figure("rssn_mb", f"RSS, {sizes.servers}", "MB", ratio=False),
            ),
            lifecycle.servers,
            scope="servers",
        ),
    ]
    return tuple(specs)


WORKLOADS = tuple(spec.name for spec in workloads(Sizes()))
