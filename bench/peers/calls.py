"""Workloads of tool calls on a running stack: latency, throughput, big results, parallelism,
and the nested hop (a second proxy of the arm's kind in front of it)."""

from __future__ import annotations

import statistics
import time

import anyio
from mcp import Client

from .arms import (
    GATEWAY,
    Arm,
    Backend,
    Env,
    Stack,
    front,
    gateway_config,
    http_backend,
    tool_names,
)
from .measure import (
    ECHO,
    Figures,
    NotApplicable,
    Workload,
    call_ok,
    cpu_seconds,
    percentile,
    timed,
)
from .venvs import peer_bin

__all__ = ["blobs", "clients", "nested", "parallel_sleep", "sequential"]


async def sequential(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    assert stack is not None
    echo = stack.tools["echo"]
    await timed(stack.client, echo, ECHO, env.sizes.warmup)
    cpu = cpu_seconds(stack.pid)
    samples = await timed(stack.client, echo, ECHO, env.sizes.calls, env.sizes.calls_budget)
    cpu = cpu_seconds(stack.pid) - cpu
    return {
        "p50_ms": percentile(samples, 50),
        "p90_ms": percentile(samples, 90),
        "p99_ms": percentile(samples, 99),
        "cpu_ms": cpu * 1000 / len(samples),
    }


def clients(count: int) -> Workload:
    async def workload(arm: Arm, stack: Stack | None, env: Env) -> Figures:
        assert stack is not None
        if stack.url is None:
            raise NotApplicable("stdio serves the one client that spawned it")
        return {"calls_per_s": await _throughput(stack, count, env.sizes.seconds)}

    return workload


async def _throughput(stack: Stack, count: int, seconds: float) -> float:
    """`count` clients, each on its own session and connection, calling echo in a loop for
    `seconds`; completed calls per second."""
    url = stack.url
    assert url is not None
    echo = stack.tools["echo"]
    done = [0]
    connected = [0]
    all_connected = anyio.Event()
    start = anyio.Event()
    deadline = [0.0]

    async def loop() -> None:
        async with Client(url, cache=None) as client:
            connected[0] += 1
            if connected[0] == count:
                all_connected.set()
            await start.wait()
            while time.perf_counter() < deadline[0]:
                await call_ok(client, echo, ECHO)
                done[0] += 1

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(loop)
        await all_connected.wait()
        started = time.perf_counter()
        deadline[0] = started + seconds
        start.set()
    return done[0] / (time.perf_counter() - started)


def blobs(size: int, calls: int) -> Workload:
    async def workload(arm: Arm, stack: Stack | None, env: Env) -> Figures:
        assert stack is not None
        blob = stack.tools["blob"]
        result = await call_ok(stack.client, blob, {"n": size})  # warm up, and check the size
        text = getattr(result.content[0], "text", "")
        if len(text) != size:
            raise RuntimeError(f"blob({size}) came back with {len(text)} characters")
        started = time.perf_counter()
        for _ in range(calls):
            await call_ok(stack.client, blob, {"n": size})
        return {"mb_per_s": size * calls / (time.perf_counter() - started) / 1e6}

    return workload


async def parallel_sleep(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    """`parallel` calls of sleep(ms) at once from one client; wall time of the slowest."""
    assert stack is not None
    sizes = env.sizes
    sleep = stack.tools["sleep"]
    walls: list[float] = []
    for _ in range(sizes.parallel_repeats):
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(sizes.parallel):
                tg.start_soon(call_ok, stack.client, sleep, {"ms": sizes.sleep_ms})
        walls.append((time.perf_counter() - started) * 1000)
    return {"wall_ms": statistics.median(walls)}


async def nested(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    """echo through a second proxy of the arm's kind in front of the first (direct: the plain
    call, for the ratio)."""
    assert stack is not None
    sizes = env.sizes
    if arm.kind == "direct":
        samples = await timed(
            stack.client, stack.tools["echo"], ECHO, sizes.nested_calls, sizes.calls_budget
        )
        return {"p50_ms": statistics.median(samples)}
    assert stack.url is not None
    workdir = env.workdir / f"{arm.name}-nested"
    if arm.ours and arm.stdio:  # B: a gateway like the main one, as A's stdio server
        config = gateway_config(workdir / "inner.toml", {"d": Backend.stdio()})
        inner = Backend(command=(GATEWAY, "serve", "--stdio", "--config", str(config)))
    elif arm.kind == "mcp-proxy":  # its client mode: stdio in front, the inner proxy's URL behind
        inner = Backend(
            command=(
                str(peer_bin("mcp-proxy", "mcp-proxy")),
                "--transport",
                "streamablehttp",
                stack.url,
            )
        )
    else:
        inner = http_backend(arm, stack.url)
    async with (
        front(arm, {"b": inner}, workdir) as outer,
        Client(outer.url, cache=None) as client,
    ):
        echo = (await tool_names(client))["echo"]
        await timed(client, echo, ECHO, sizes.warmup)
        samples = await timed(client, echo, ECHO, sizes.nested_calls, sizes.calls_budget)
    return {"p50_ms": statistics.median(samples)}
