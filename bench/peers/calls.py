"""Workloads of tool calls on a running stack: latency, throughput, big results, parallelism,
and the nested hop (a second proxy of the arm's kind in front of it)."""

from __future__ import annotations

import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.session import ClientRequestContext

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
    Together,
    call_ok,
    cpu_seconds,
    percentile,
    timed,
)
from .sizes import Sizes
from .venvs import peer_bin

__all__ = ["asking", "blobs", "clients", "nested", "parallel_sleep", "sequential"]


async def sequential(stacks: Sequence[Stack], env: Env) -> dict[str, Figures | Exception]:
    """Sequential echo calls, in turns (`_in_turns`)."""
    sizes = env.sizes
    turns = await _in_turns(stacks, env, "echo", ECHO, sizes.calls, sizes.warmup)
    return {t.stack.arm.name: t.failed or t.latencies() for t in turns}


def asking(mode: str) -> Together:
    """`sequential` from a client that declares roots, so its servers may ask it during a
    call: with `mode="legacy"`, what desktop clients open (Claude Code, VS Code, Cursor), a
    2025-era session; with `mode="auto"`, the SDK's `Client` given a roots callback, which
    speaks 2026-07-28 where the front does. The other call workloads' clients declare
    nothing."""

    async def workload(stacks: Sequence[Stack], env: Env) -> dict[str, Figures | Exception]:
        return await _asking(stacks, env, mode)

    return workload


async def _asking(stacks: Sequence[Stack], env: Env, mode: str) -> dict[str, Figures | Exception]:
    sizes = env.sizes
    found: dict[str, Figures | Exception] = {}
    sessions: list[Stack] = []
    release = anyio.Event()

    async def hold(stack: Stack, url: str, opened: anyio.Event) -> None:
        # A session in a task of its own: one failing inside ends this task, not the round's
        # (bench/RESULTS.md, item 53); its arm's next call fails, and the arm with it.
        try:
            session = Client(url, mode=mode, list_roots_callback=_no_roots, cache=None)
            async with session as client:
                sessions.append(replace(stack, client=client))
                opened.set()
                await release.wait()
        except Exception as exc:
            found[stack.arm.name] = exc
        finally:
            opened.set()

    turns: list[_Turns] = []
    async with anyio.create_task_group() as tg:
        for stack in stacks:
            if stack.url is None:
                found[stack.arm.name] = NotApplicable("stdio: the one client that spawned it")
                continue
            opened = anyio.Event()
            tg.start_soon(hold, stack, stack.url, opened)
            await opened.wait()
        try:
            turns = await _in_turns(sessions, env, "echo", ECHO, sizes.asking_calls, sizes.warmup)
        finally:
            release.set()
    for t in turns:  # a session's own failure says more than its arm's failed call
        name = t.stack.arm.name
        found[name] = (found.get(name) or t.failed) if t.failed else t.latencies()
    return found


async def _no_roots(context: ClientRequestContext) -> types.ListRootsResult:
    del context
    return types.ListRootsResult(roots=[])


def blobs(size: int, calls: int) -> Together:
    """Sequential calls of `blob(size)`, in turns (`_in_turns`): bytes of results a second."""

    def sized(result: types.CallToolResult) -> None:
        text = getattr(result.content[0], "text", "") if result.content else ""
        if len(text) != size:
            raise RuntimeError(f"blob({size}) came back with {len(text)} characters")

    async def workload(stacks: Sequence[Stack], env: Env) -> dict[str, Figures | Exception]:
        turns = await _in_turns(stacks, env, "blob", {"n": size}, calls, 1, sized)
        return {
            t.stack.arm.name: t.failed or {"mb_per_s": size * len(t.samples) / t.spent / 1e6}
            for t in turns
        }

    return workload


async def _in_turns(
    stacks: Sequence[Stack],
    env: Env,
    tool: str,
    arguments: dict[str, Any],
    calls: int,
    warmup: int,
    check: Callable[[types.CallToolResult], None] = lambda _result: None,
) -> list[_Turns]:
    """`calls` sequential calls of `tool` from every arm, the arms taking turns call by call
    in a new order each pass: whatever the host does meanwhile falls on every arm alike. Timed
    one arm after another, each in its own seconds, the figures moved with the host between
    two workloads of one round by more than the arms differ (bench/RESULTS.md, item 37). An arm
    whose calls have taken `calls_budget` seconds, with a tenth of them made, stops taking
    part; so does one whose call fails."""
    sizes = env.sizes
    pids = Counter([env.downstream_pid, *(stack.pid for stack in stacks)])
    turns = [
        _Turns(stack, stack.tools[tool], arguments, check, sizes.timeout, pids[stack.pid] > 1)
        for stack in stacks
    ]
    order = random.Random(len(stacks))
    for _ in range(warmup):
        for t in order.sample(turns, len(turns)):
            await t.call(counted=False)
    taking = [t for t in turns if t.failed is None]
    for t in taking:
        t.start()
    for _ in range(calls):
        order.shuffle(taking)
        for t in list(taking):
            done = not await t.call(counted=True)
            if not done and t.spent > sizes.calls_budget:
                done = len(t.samples) >= calls // 10
            if done:
                t.stop()
                taking.remove(t)
        if not taking:
            break
    for t in taking:
        t.stop()
    return turns


class _Turns:
    """One arm's part in `_in_turns`."""

    def __init__(
        self,
        stack: Stack,
        tool: str,
        arguments: dict[str, Any],
        check: Callable[[types.CallToolResult], None],
        seconds: float,
        shared: bool,
    ) -> None:
        self.stack = stack
        self.tool = tool
        self.arguments = arguments
        self.check = check
        self.seconds = seconds
        """How long one call may take before the arm counts as failed."""
        self.samples: list[float] = []
        """ms each"""
        self.spent = 0.0
        """Seconds its counted calls took."""
        self.failed: Exception | None = None
        self._shared = shared
        """Its process serves other arms too (direct's is the downstream): its CPU is counted
        during its own calls only, not from the first to the last."""
        self._cpu = 0.0

    def start(self) -> None:
        """Its counted calls begin."""
        if not self._shared:
            self._cpu = cpu_seconds(self.stack.pid)

    async def call(self, counted: bool) -> bool:
        """One call; False if it failed (the arm is out)."""
        if self.failed is not None:
            return False
        cpu = cpu_seconds(self.stack.pid) if counted and self._shared else 0.0
        started = time.perf_counter()
        try:
            with anyio.fail_after(self.seconds):
                self.check(await call_ok(self.stack.client, self.tool, self.arguments))
        except Exception as exc:
            self.failed = exc
            return False
        if counted:
            elapsed = time.perf_counter() - started
            self.samples.append(elapsed * 1000)
            self.spent += elapsed
            if self._shared:
                self._cpu += cpu_seconds(self.stack.pid) - cpu
        return True

    def stop(self) -> None:
        """Its counted calls are over: the process's CPU up to here is theirs."""
        if not self._shared:
            self._cpu = cpu_seconds(self.stack.pid) - self._cpu

    def latencies(self) -> Figures:
        return {
            "p50_ms": percentile(self.samples, 50),
            "p90_ms": percentile(self.samples, 90),
            "p99_ms": percentile(self.samples, 99),
            "cpu_ms": self._cpu * 1000 / len(self.samples),
        }


def clients(count: int) -> Together:
    """`count` clients per arm, each on its own session and connection, calling echo in a
    loop. The arms take turns (in a new order each pass) until each has been counted for
    `seconds`: a turn counts the calls that end from the moment every client has had an answer
    (the steady rate, whatever the arm's latency: counted from the start, a slower arm's ramp
    and drain would weigh on its rate) for `window` seconds or `waves` times the time that
    first answer took, whichever is longer; the calls still in flight at the end of it finish
    uncounted. So whatever the host does falls on every arm in turn, not on one arm's two
    seconds, and a turn holds many calls per client even when each takes 200 ms (bench/
    RESULTS.md, items 37 and 38)."""

    async def workload(stacks: Sequence[Stack], env: Env) -> dict[str, Figures | Exception]:
        sizes = env.sizes
        found: dict[str, Figures | Exception] = {}
        pools: dict[str, _Pool] = {}
        counted: dict[str, int] = {}
        spent: dict[str, float] = {}
        async with anyio.create_task_group() as tg:
            for stack in stacks:
                if stack.url is None:
                    found[stack.arm.name] = NotApplicable(
                        "stdio serves the one client that spawned it"
                    )
                    continue
                pool = pools[stack.arm.name] = _Pool(stack.url, stack.tools["echo"], count)
                tg.start_soon(pool.hold)
            try:
                for pool in pools.values():
                    await pool.ready.wait()
                counted.update(dict.fromkeys(pools, 0))
                spent.update(dict.fromkeys(pools, 0.0))
                order = random.Random(count)
                while due := [n for n, p in pools.items() if p.ok and spent[n] < sizes.seconds]:
                    for name in order.sample(due, len(due)):
                        turn = await pools[name].turn(sizes)
                        if turn is not None:
                            counted[name] += turn[0]
                            spent[name] += turn[1]
            finally:
                for pool in pools.values():
                    pool.release()
        for name, pool in pools.items():
            found[name] = pool.failed or {"calls_per_s": counted[name] / spent[name]}
        return found

    return workload


class _Pool:
    """One arm's clients, held open by a task of their own (`hold`): a client that fails
    inside cancels the task it was opened in, and only that arm must stop (opened in the
    workload's task, such a failure once ended every later workload of the round without a
    word: bench/RESULTS.md, item 53)."""

    def __init__(self, url: str, echo: str, count: int) -> None:
        self.url = url
        self.echo = echo
        self.count = count
        self.ready = anyio.Event()
        self.failed: Exception | None = None
        self._asks, self._asked = anyio.create_memory_object_stream[Sizes](1)
        self._answers, self._answered = anyio.create_memory_object_stream[tuple[int, float]](1)

    @property
    def ok(self) -> bool:
        return self.failed is None

    async def hold(self) -> None:
        """Open the clients, run the turns asked for, close them when released."""
        try:
            async with AsyncExitStack() as exits:
                clients = [
                    await exits.enter_async_context(Client(self.url, cache=None))
                    for _ in range(self.count)
                ]
                self.ready.set()
                async with self._asked, self._answers:
                    async for sizes in self._asked:
                        with anyio.fail_after(sizes.timeout):
                            turn = await _turn(clients, self.echo, sizes.window, sizes.waves)
                        await self._answers.send(turn)
        except Exception as exc:
            self.failed = self.failed or exc
        finally:
            self.ready.set()
            self._answers.close()

    async def turn(self, sizes: Sizes) -> tuple[int, float] | None:
        """One turn's (counted calls, seconds); None if the arm failed (`failed` says why)."""
        try:
            await self._asks.send(sizes)
            return await self._answered.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.failed = self.failed or RuntimeError("the clients ended")
            return None

    def release(self) -> None:
        """No more turns: `hold` closes the clients."""
        self._asks.close()
        self._answered.close()


async def _turn(
    clients: Sequence[Client], echo: str, window: float, waves: int
) -> tuple[int, float]:
    """The calls that end within the counted span after every client's first answer, and the
    span: `window` seconds or `waves` times that first answer's wait, whichever is longer."""
    answered = [0]
    counted = [0]
    opens, closes = [math.inf], [math.inf]
    started = time.perf_counter()

    async def loop(client: Client) -> None:
        await call_ok(client, echo, ECHO)
        answered[0] += 1
        if answered[0] == len(clients):
            opens[0] = time.perf_counter()
            closes[0] = opens[0] + max(window, waves * (opens[0] - started))
        while True:
            await call_ok(client, echo, ECHO)
            now = time.perf_counter()
            if now > closes[0]:
                return
            if now >= opens[0]:
                counted[0] += 1

    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(loop, client)
    return counted[0], closes[0] - opens[0]


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
