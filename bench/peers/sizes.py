"""How much each workload does: the full benchmark, and `--quick` (the test suite's smoke run)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FULL", "QUICK", "Sizes"]


@dataclass(frozen=True)
class Sizes:
    warmup: int = 50
    calls: int = 1000
    """Sequential small calls per arm and round..."""
    calls_budget: float = 20
    """...or as many as fit in this many seconds (at least a tenth of them)."""
    clients: tuple[int, ...] = (10, 50)
    seconds: float = 12.0
    """How long the concurrent clients' calls are counted, per arm and round..."""
    window: float = 0.5
    """...in turns of at least this many seconds (`calls.clients`)..."""
    waves: int = 4
    """...and at least this many times a turn's first answer took (a call's wait under load)."""
    blob_calls: tuple[tuple[int, int], ...] = ((1_000_000, 100), (4_000_000, 25))
    """(result bytes, calls)."""
    parallel: int = 10
    sleep_ms: int = 100
    parallel_repeats: int = 5
    servers: int = 50
    tools_per_server: int = 20
    list_repeats: int = 20
    """Warm tools/list calls, or as many as fit in `calls_budget` / 2 seconds (at least 3)."""
    cold_starts: int = 3
    """Starts per arm, server count and round, the median of each figure kept: one start on
    a loaded host moves by tens of per cent."""
    idle_sessions: int = 1000
    sessions_budget: float = 90
    """Seconds to open the idle sessions, or to run the cycles: a slow front does fewer (at
    least a tenth), and the figures say how many."""
    cycles: int = 1000
    cycle_workers: int = 10
    """Sessions cycling at once."""
    agent_turns: int = 5
    agent_fanout: int = 10
    agent_sleep_ms: int = 50
    agent_runs: int = 3
    overhead_iterations: int = 10
    overhead_runs: int = 15
    """Runs of the loop and of the answer each, in turns: a tenth of one run's noise is a
    millisecond of overhead per iteration."""
    wide_tools: int = 100
    nested_calls: int = 300
    asking_calls: int = 500
    """Sequential calls from a client that can be asked (`calls.asking`)."""
    timeout: float = 900
    """Seconds one arm may take for one workload before it counts as failed."""

    @property
    def critical_path_ms(self) -> float:
        return self.agent_turns * self.agent_sleep_ms


FULL = Sizes()
QUICK = Sizes(
    warmup=3,
    calls=30,
    seconds=0.3,
    window=0.15,
    waves=3,
    blob_calls=((1_000_000, 2), (4_000_000, 1)),
    parallel_repeats=1,
    servers=3,
    list_repeats=3,
    cold_starts=1,
    idle_sessions=10,
    cycles=10,
    cycle_workers=2,
    agent_runs=1,
    overhead_iterations=3,
    overhead_runs=1,
    nested_calls=20,
    asking_calls=20,
    timeout=60,
)
