"""Rounds: every selected workload on every arm, the arms interleaved, their order rotated.

A round starts its own downstream process and every arm's main stack (concurrently: start-up
is not measured there), runs the main and nested workloads arm after arm, stops the stacks,
then times the cold starts. A failure is recorded for its arm, workload and round, and the
benchmark goes on.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import anyio
import psutil

from .agents import agent_config
from .arms import Arm, Env, Stack, downstream, open_stack
from .measure import Figures, NotApplicable, Together, Workload
from .sizes import Sizes
from .workloads import WorkloadSpec

__all__ = ["Outcome", "RoundResults", "describe", "listening_addresses", "run_rounds"]

Log = Callable[[str], None]


@dataclass(frozen=True)
class Outcome:
    figures: Figures | None = None
    not_applicable: str | None = None
    failed: str | None = None


RoundResults = dict[str, dict[str, Outcome]]
"""arm -> workload -> outcome, for one round."""


def describe(exc: BaseException) -> str:
    """The leaf errors of an exception (group), one line each."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)  # pyright: ignore[reportUnknownArgumentType, reportUnknownMemberType, reportUnknownVariableType]
    return f"{type(exc).__name__}: {exc}".splitlines()[0]


def listening_addresses() -> set[str]:
    """The addresses this process's descendants listen on (all must be 127.0.0.1)."""
    found: set[str] = set()
    for child in psutil.Process().children(recursive=True):
        try:
            connections = child.net_connections(kind="inet")
        except psutil.Error:
            continue
        found |= {c.laddr.ip for c in connections if c.status == psutil.CONN_LISTEN}
    return found


@asynccontextmanager
async def open_stacks(
    arms: Sequence[Arm], env: Env, log: Log
) -> AsyncGenerator[dict[str, Stack | str]]:
    """Every arm's main stack, started concurrently; an arm that failed to start maps to why."""
    stacks: dict[str, Stack | str] = {}
    release = anyio.Event()
    ready = {arm.name: anyio.Event() for arm in arms}

    async def hold(arm: Arm) -> None:
        try:
            agents = agent_config(env.workdir / arm.name, env.sizes) if arm.ours else ""
            async with open_stack(arm, env, agents) as stack:
                stacks[arm.name] = stack
                ready[arm.name].set()
                await release.wait()
        except Exception as exc:
            if arm.name not in stacks:
                stacks[arm.name] = f"did not start: {describe(exc)}"
                log(f"  {arm.name} did not start: {describe(exc)}")
            else:
                log(f"  {arm.name}: error while stopping: {describe(exc)}")
        finally:
            ready[arm.name].set()

    async with anyio.create_task_group() as tg:
        for arm in arms:
            tg.start_soon(hold, arm)
        for event in ready.values():
            await event.wait()
        try:
            yield stacks
        finally:
            release.set()


async def _measure(
    spec: WorkloadSpec, arm: Arm, stack: Stack | str | None, env: Env, log: Log
) -> Outcome:
    if isinstance(stack, str):
        return Outcome(failed=stack)
    try:
        with anyio.fail_after(env.sizes.timeout):
            figures = await cast(Workload, spec.run)(arm, stack, env)
    except NotApplicable as exc:
        return Outcome(not_applicable=str(exc))
    except Exception as exc:
        log(f"  {arm.name} {spec.name} failed: {describe(exc)}")
        if os.environ.get("BENCH_TRACEBACKS"):
            traceback.print_exc(file=sys.stderr)
        return Outcome(failed=describe(exc))
    shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items() if v is not None)
    log(f"  {spec.name:<15} {arm.name:<20} {shown}")
    return Outcome(figures=figures)


async def _measure_together(
    spec: WorkloadSpec,
    arms: Sequence[Arm],
    stacks: dict[str, Stack | str],
    env: Env,
    log: Log,
) -> dict[str, Outcome]:
    outcomes = {name: Outcome(failed=why) for name, why in stacks.items() if isinstance(why, str)}
    live = [stack for arm in arms if isinstance(stack := stacks[arm.name], Stack)]
    together = cast(Together, spec.run)
    for name, figures in (await together(live, env)).items():
        if isinstance(figures, NotApplicable):
            outcomes[name] = Outcome(not_applicable=str(figures))
            continue
        if isinstance(figures, Exception):
            log(f"  {name} {spec.name} failed: {describe(figures)}")
            outcomes[name] = Outcome(failed=describe(figures))
            continue
        shown = ", ".join(f"{k} {v:.4g}" for k, v in figures.items() if v is not None)
        log(f"  {spec.name:<15} {name:<20} {shown}")
        outcomes[name] = Outcome(figures=figures)
    return outcomes


async def run_rounds(
    arms: Sequence[Arm],
    specs: Sequence[WorkloadSpec],
    sizes: Sizes,
    rounds: int,
    workdir: Path,
    log: Log,
    listening: set[str],
    after_round: Callable[[list[RoundResults]], None] = lambda _results: None,
) -> list[RoundResults]:
    """`after_round` gets the rounds so far after each one (a stopped run keeps them)."""
    results: list[RoundResults] = []
    on_stacks = [s for s in specs if s.scope in ("main", "together", "nested")]
    cold = [s for s in specs if s.scope == "servers"]
    for number in range(rounds):
        shift = number % len(arms)
        order = [*arms[shift:], *arms[:shift]]
        log(f"round {number + 1}/{rounds}: {', '.join(a.name for a in order)} (load {_load()})")
        outcomes: RoundResults = {arm.name: {} for arm in arms}
        async with downstream(sizes.servers, sizes.wide_tools) as served:
            env = Env(sizes, workdir / f"round{number + 1}", served.url, served.pid)
            if on_stacks:
                async with open_stacks(order, env, log) as stacks:
                    listening |= listening_addresses()
                    for spec in on_stacks:
                        if spec.scope == "together":
                            together = await _measure_together(spec, order, stacks, env, log)
                            for name, outcome in together.items():
                                outcomes[name][spec.name] = outcome
                            continue
                        for arm in order:
                            outcome = await _measure(spec, arm, stacks[arm.name], env, log)
                            outcomes[arm.name][spec.name] = outcome
            for spec in cold:
                for arm in order:
                    outcomes[arm.name][spec.name] = await _measure(spec, arm, None, env, log)
        for arm in arms:  # a workload left out without an error must not pass for measured
            for spec in specs:
                if spec.name not in outcomes[arm.name]:
                    log(f"  {arm.name} {spec.name}: not measured in round {number + 1}")
                    outcomes[arm.name][spec.name] = Outcome(failed="not measured")
        results.append(outcomes)
        after_round(results)
    return results


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())
