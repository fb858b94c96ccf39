"""Workloads of sessions and processes: idle sessions, open/close cycles, and cold starts in
front of 1 and N downstream servers."""

from __future__ import annotations

import json
import statistics
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench._processes import REPO, running
from bench.downstream import READY as DOWNSTREAM_READY
from toolkits import json_bytes
from toolkits.mcp.event_stream import EventData

from .arms import (
    DOWNSTREAM,
    PYTHON,
    Arm,
    Backend,
    Env,
    Stack,
    front,
    http_backend,
    new_stdio_child,
    stdio_children,
)
from .measure import (
    ECHO,
    Figures,
    NotApplicable,
    call_ok,
    rss_bytes,
    session,
    settle,
    shared_http,
)

__all__ = ["cycles", "idle_sessions", "servers"]

HANDSHAKES = 20
"""Sessions opening at once."""


async def idle_sessions(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    """RSS the front gains per open, idle session (handshake era: a session is server state).
    Opening stops early when `sessions_budget` runs out (at least a tenth are opened)."""
    assert stack is not None
    url = stack.url
    if url is None:
        raise NotApplicable("stdio: one session per process")
    sizes = env.sizes
    async with shared_http() as http:
        for _ in range(10):  # the code paths of a session, loaded before the baseline
            async with session(url, http):
                pass
        await settle()
        before = after = rss_bytes(stack.pid)
        opened = [0]
        release = anyio.Event()
        limit = anyio.Semaphore(HANDSHAKES)
        deadline = time.perf_counter() + sizes.sessions_budget

        async def hold() -> None:
            async with AsyncExitStack() as exits:
                try:
                    await exits.enter_async_context(session(url, http))
                finally:
                    limit.release()
                opened[0] += 1
                await release.wait()

        async with anyio.create_task_group() as tg:
            for number in range(sizes.idle_sessions):
                if time.perf_counter() > deadline and number >= sizes.idle_sessions // 10:
                    break
                await limit.acquire()
                tg.start_soon(hold)
            for _ in range(HANDSHAKES):  # the last handshakes are done
                await limit.acquire()
            await settle()
            after = rss_bytes(stack.pid)
            release.set()
    return {"kb_per_session": (after - before) / opened[0] / 1024, "sessions": opened[0]}


async def cycles(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    """Sessions opened, used once and closed (`cycle_workers` at a time): does the front's RSS
    drift? Stops early when `sessions_budget` runs out (after at least a tenth)."""
    assert stack is not None
    url = stack.url
    if url is None:
        raise NotApplicable("stdio: a session is a process")
    sizes = env.sizes
    echo = stack.tools["echo"]
    done = [0]
    async with shared_http() as http:

        async def cycle(times: int, deadline: float) -> None:
            for _ in range(times):
                async with session(url, http) as client:
                    await call_ok(client, echo, ECHO)
                done[0] += 1
                if time.perf_counter() > deadline and done[0] >= sizes.cycles // 10:
                    return

        async def cycles_at_once(total: int, deadline: float) -> None:
            async with anyio.create_task_group() as tg:
                for _ in range(sizes.cycle_workers):
                    tg.start_soon(cycle, total // sizes.cycle_workers, deadline)

        await cycles_at_once(max(sizes.cycle_workers, sizes.cycles // 10), float("inf"))
        await settle()
        before = rss_bytes(stack.pid)
        done[0] = 0
        started = time.perf_counter()
        await cycles_at_once(sizes.cycles, started + sizes.sessions_budget)
        elapsed = time.perf_counter() - started
        await settle()
        after = rss_bytes(stack.pid)
    return {
        "rss_drift_pct": (after - before) / before * 100,
        "cycles_per_s": done[0] / elapsed,
        "cycles": done[0],
    }


async def servers(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    """Cold start (process start to the first complete tools/list), warm tools/list (through
    the mcp `Client`, and answered: a raw request's last byte) and RSS, in front of 1 server
    and of N, each with `tools_per_server` tools (direct over HTTP: the warm list of as many
    tools from one server; direct over stdio: N servers started at once, the floor of a stdio
    front's cold start); each the median of `cold_starts` starts."""
    figures: Figures = {}
    for label, count in (("1", 1), ("n", env.sizes.servers)):
        keys = (f"cold{label}_ms", f"warm{label}_ms", f"rss{label}_mb", f"answered{label}_ms")
        if count > 1 and arm.kind == "direct" and not arm.stdio:
            # No aggregate, but as many tools from one server: what listing them costs the
            # driver and a server, against which the fronts' warm list is a ratio.
            tools = count * env.sizes.tools_per_server
            _, warm, _, answered = await _cold_start(arm, env, 1, tools_per_server=tools)
            figures.update({keys[0]: None, keys[1]: warm, keys[2]: None, keys[3]: answered})
            continue
        if count > 1 and arm.kind == "direct" and arm.stdio:
            # No aggregate either, but the floor of a stdio front's cold start: the servers'
            # own start, all at once on this host.
            cold = [await _stdio_servers_at_once(env, count) for _ in range(env.sizes.cold_starts)]
            figures.update(dict.fromkeys(keys))
            figures[keys[0]] = statistics.median(cold)
            continue
        if count > 1 and arm.kind in ("direct", "mcp-proxy", "floor-relay", "floor-bare"):
            figures.update(dict.fromkeys(keys, None))  # one server per URL: no aggregate list
            continue
        starts = [await _cold_start(arm, env, count) for _ in range(env.sizes.cold_starts)]
        medians = (
            None if None in figure else statistics.median(figure)
            for figure in zip(*starts, strict=True)
        )
        figures.update(zip(keys, medians, strict=True))
    cold1, coldn = figures["cold1_ms"], figures["coldn_ms"]
    figures["coldn_x1"] = coldn / cold1 if cold1 and coldn else None
    return figures


async def _stdio_servers_at_once(env: Env, count: int) -> float:
    """`count` stdio servers started at once by the driver, a client each, from the first
    start to the last first tools/list, ms: what any stdio front's cold start waits for."""
    args = [DOWNSTREAM, "--stdio", "--tools", str(env.sizes.tools_per_server)]
    target = StdioServerParameters(command=PYTHON, args=args, cwd=REPO)
    listed = 0
    every_one_listed = anyio.Event()
    took = 0.0
    started = time.perf_counter()

    async def start_one() -> None:
        nonlocal listed, took
        async with Client(target, cache=None) as client:
            tools = (await client.list_tools()).tools
            if len(tools) != env.sizes.tools_per_server:
                raise RuntimeError(f"{len(tools)} tools listed, not {env.sizes.tools_per_server}")
            listed += 1
            if listed == count:
                took = (time.perf_counter() - started) * 1000
                every_one_listed.set()
            await every_one_listed.wait()  # all of them up at once, as behind a front

    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(start_one)
    return took


async def _cold_start(
    arm: Arm, env: Env, count: int, *, tools_per_server: int | None = None
) -> tuple[float, float, float, float | None]:
    """Cold start, warm list (the mcp `Client`'s), RSS, and the warm list's answer alone (a
    raw request's last byte: no client parse; None over stdio), ms, ms, MB, ms."""
    per_server = tools_per_server or env.sizes.tools_per_server
    async with AsyncExitStack() as exits:
        before = stdio_children()
        started = time.perf_counter()
        pid: int | None = None
        target: str | StdioServerParameters
        if arm.kind == "direct" and arm.stdio:
            args = [DOWNSTREAM, "--stdio", "--tools", str(per_server)]
            target = StdioServerParameters(command=PYTHON, args=args, cwd=REPO)
        elif arm.kind == "direct":
            command = [PYTHON, DOWNSTREAM, "--http", "--servers", "1", "--wide", "3"]
            command += ["--tools-per-server", str(per_server)]
            process = await exits.enter_async_context(running(command, ready=DOWNSTREAM_READY))
            target, pid = f"{process.url}/s0/mcp", process.pid
        else:
            backends = {
                f"s{i}": Backend.stdio("--tools", str(per_server))
                if arm.stdio
                else http_backend(arm, f"{env.downstream}/s{i}/mcp")
                for i in range(count)
            }
            workdir = env.workdir / f"{arm.name}-servers{count}"
            started_front = await exits.enter_async_context(front(arm, backends, workdir))
            target, pid = started_front.url, started_front.pid
        client = await exits.enter_async_context(Client(target, cache=None))
        tools = (await client.list_tools()).tools
        cold = (time.perf_counter() - started) * 1000
        if len(tools) != count * per_server:
            raise RuntimeError(f"{len(tools)} tools listed, not {count} x {per_server}")
        if pid is None:
            pid = new_stdio_child(before)
        warm: list[float] = []
        deadline = time.perf_counter() + env.sizes.calls_budget / 2
        for _ in range(env.sizes.list_repeats):
            listed = time.perf_counter()
            await client.list_tools()
            warm.append((time.perf_counter() - listed) * 1000)
            if listed > deadline and len(warm) >= 3:
                break
        answered = None
        if isinstance(target, str):
            answered = await _answered_list(target, count * per_server, env.sizes.list_repeats)
        return cold, statistics.median(warm), rss_bytes(pid) / 1e6, answered


async def _answered_list(url: str, tools: int, repeats: int) -> float:
    """The median time, ms, from sending a tools/list to the last byte of its answer, on a
    2025-era session of raw HTTP requests (every arm speaks that era): what the server spends
    answering and the wire, without the mcp `Client`'s parse of the tools into models."""
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        opened = await http.post(url, json=initialize, headers=headers)
        opened.raise_for_status()
        version = _json_rpc(opened.content)["result"]["protocolVersion"]
        headers["mcp-protocol-version"] = version
        if "mcp-session-id" in opened.headers:
            headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        (await http.post(url, json=note, headers=headers)).raise_for_status()
        times: list[float] = []
        for index in range(1 + repeats):  # the first: checked, not timed
            body = json_bytes({"jsonrpc": "2.0", "id": index + 1, "method": "tools/list"})
            sent = time.perf_counter()
            data = (await http.post(url, content=body, headers=headers)).content
            if index:
                times.append((time.perf_counter() - sent) * 1000)
            else:
                result = _json_rpc(data)["result"]
                if len(result["tools"]) != tools or "nextCursor" in result:
                    raise RuntimeError(
                        f"a raw tools/list had {len(result['tools'])} tools, not {tools}"
                    )
        if "mcp-session-id" in headers:
            await http.delete(url, headers=headers)
        return statistics.median(times)


def _json_rpc(data: bytes) -> dict[str, Any]:
    """The one JSON-RPC answer in a JSON body or an event stream."""
    if data.lstrip().startswith(b"{"):
        return json.loads(data)
    events = EventData(len(data) + 1).feed(data)
    answers = [json.loads(event) for event in events if event.strip()]
    return next(answer for answer in answers if "id" in answer)
