"""What the workloads measure with: timed calls, percentiles, a process's CPU time and RSS."""

from __future__ import annotations

import statistics
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import mcp_types as types
import psutil
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from bench._processes import cpu_seconds

from .arms import ECHO_BYTES, Arm, Env, Stack

__all__ = [
    "ECHO",
    "Figures",
    "NotApplicable",
    "Together",
    "Workload",
    "call_ok",
    "cpu_seconds",
    "percentile",
    "rss_bytes",
    "session",
    "settle",
    "shared_http",
    "timed",
]

ECHO = {"message": "x" * ECHO_BYTES}

Figures = dict[str, float | None]
"""A workload's figures for one arm in one round; None: not applicable to this arm."""
Workload = Callable[[Arm, Stack | None, Env], Awaitable[Figures]]
"""Main and nested workloads get the arm's running stack; the servers workload starts its own."""
Together = Callable[[Sequence[Stack], Env], Awaitable[dict[str, Figures | Exception]]]
"""A workload on every arm's stack at once: figures by arm name, or why that arm failed."""


class NotApplicable(Exception):
    """The arm cannot do this workload; the message says why."""


def percentile(samples: Sequence[float], q: int) -> float:
    if len(samples) == 1:
        return samples[0]
    return statistics.quantiles(samples, n=100, method="inclusive")[q - 1]


def rss_bytes(pid: int) -> int:
    return psutil.Process(pid).memory_info().rss


async def call_ok(client: Client, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return result


async def timed(
    client: Client,
    tool: str,
    arguments: dict[str, Any],
    count: int,
    budget: float | None = None,
) -> list[float]:
    """`count` sequential calls, or fewer (at least a tenth) if `budget` seconds run out first
    (a slow peer must not hold up the benchmark for many minutes); ms each."""
    samples: list[float] = []
    deadline = time.perf_counter() + budget if budget is not None else None
    for _ in range(count):
        started = time.perf_counter()
        await call_ok(client, tool, arguments)
        samples.append((time.perf_counter() - started) * 1000)
        if deadline is not None and started > deadline and len(samples) >= count // 10:
            break
    return samples


@asynccontextmanager
async def shared_http() -> AsyncGenerator[httpx2.AsyncClient]:
    """One connection pool for many sessions (the MCP transports' own timeouts, no limits),
    so a thousand sessions cost the driver little."""
    timeout = httpx2.Timeout(30, read=300)
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(timeout=timeout, limits=limits) as client:
        yield client


def session(url: str, http: httpx2.AsyncClient, *, legacy: bool = True) -> Client:
    """A session on a shared pool; `legacy`: the 2025-11-25 handshake era, where a session is
    state the server keeps (2026-07-28 requests are stateless)."""
    return Client(
        streamable_http_client(url, http_client=http),
        mode="legacy" if legacy else "auto",
        cache=None,
    )


async def settle() -> None:
    """Let the servers finish what the last requests started before reading their RSS."""
    await anyio.sleep(0.5)
