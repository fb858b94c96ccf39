"""What serving a tool through the gateway costs: p50 of a proxied call vs the direct call.

    .ci/install-servers && python bench/proxy_latency.py [--calls 300]

1. calculator: `FunctionToolkit.call_tool` in process (direct) against the same call through
   `agent-gateway serve` (`expose_tools = true`) over stdio and over HTTP.
2. mcp-server-time (from `.servers/py/bin/`): an SDK `Client` on its own stdio session
   (direct) against the same call through `agent-gateway serve` with the server as a node
   (`[mcpServers.time]`, `expose_tools = true`), over stdio and over HTTP.

The clients are the SDK's `Client` in its default era (2026-07-28 with these servers). Every
case warms up, then makes `--calls` sequential calls; times are per call, in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import http_process  # noqa: E402
from toolkits import FunctionToolkit, calculator  # noqa: E402

SCRIPT = Path(sys.executable).parent / "agent-gateway"
TIME_SERVER = REPO / ".servers/py/bin/mcp-server-time"
TIME_SERVER_ARGS = ["--local-timezone", "UTC"]
WARMUP = 20
CALCULATOR_ARGS = {"expression": "2 ** 10"}
TIME_ARGS = {"timezone": "UTC"}

Call = Callable[[], Awaitable[Any]]


async def measure(call: Call, calls: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    times: list[float] = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return times


def report(label: str, times: list[float], direct: float | None = None) -> float:
    p50 = statistics.median(times)
    p90 = statistics.quantiles(times, n=10)[-1]
    extra = f"  (+{p50 - direct:.3f} ms over direct)" if direct is not None else ""
    print(f"  {label:<34} p50 {p50:8.3f} ms   p90 {p90:8.3f} ms{extra}", flush=True)
    return p50


async def through_client(
    client: Client, tool: str, args: dict[str, Any], calls: int
) -> list[float]:
    async def call() -> None:
        result = await client.call_tool(tool, args)
        assert not result.is_error, result.content

    return await measure(call, calls)


async def through_gateway(config: Path, calls: int, direct: float) -> None:
    """The config's one exposed tool, through `agent-gateway serve` over stdio, then HTTP."""
    stdio = StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--stdio", "--config", str(config)], cwd=REPO
    )
    async with Client(stdio) as client:
        tool, args = await exposed_tool(client)
        times = await through_client(client, tool, args, calls)
    report("via agent-gateway serve --stdio", times, direct)
    command = [str(SCRIPT), "serve", "--http", "127.0.0.1:0", "--config", str(config)]
    async with http_process(command) as url, Client(url) as client:
        tool, args = await exposed_tool(client)
        times = await through_client(client, tool, args, calls)
    report("via agent-gateway serve --http", times, direct)


async def exposed_tool(client: Client) -> tuple[str, dict[str, Any]]:
    names = [tool.name for tool in (await client.list_tools()).tools]
    if "calculator" in names:
        return "calculator", CALCULATOR_ARGS
    return next(name for name in names if name.endswith("get_current_time")), TIME_ARGS


async def bench_calculator(calls: int, config: Path) -> None:
    print("calculator (a local function tool)")
    node = FunctionToolkit("calculator", [calculator])

    async def direct_call() -> None:
        result = await node.call_tool("calculator", CALCULATOR_ARGS)
        assert not result.is_error

    direct = report("direct (FunctionToolkit)", await measure(direct_call, calls))
    await through_gateway(config, calls, direct)


async def bench_time(calls: int, config: Path) -> None:
    print("mcp-server-time (a real MCP server, stdio)")
    if not TIME_SERVER.exists():
        print(f"  skipped: {TIME_SERVER} is missing (run .ci/install-servers)")
        return
    params = StdioServerParameters(command=str(TIME_SERVER), args=TIME_SERVER_ARGS)
    async with Client(params) as client:
        times = await through_client(client, "get_current_time", TIME_ARGS, calls)
    direct = report("direct (SDK Client)", times)
    await through_gateway(config, calls, direct)


async def main(calls: int, workdir: Path) -> None:
    cpus = os.cpu_count()
    print(f"{calls} sequential calls per case after {WARMUP} warm-up calls; {cpus} CPUs")
    await bench_calculator(calls, workdir / "calculator.toml")
    await bench_time(calls, workdir / "time.toml")


def write_configs(workdir: Path) -> None:
    exposed = "[gateway]\nexpose_tools = true\n"
    (workdir / "calculator.toml").write_text(
        f'{exposed}[tools.calculator]\nbuiltin = "calculator"\n'
    )
    (workdir / "time.toml").write_text(
        f"{exposed}[mcpServers.time]\ncommand = {json.dumps(str(TIME_SERVER))}\n"
        f"args = {json.dumps(TIME_SERVER_ARGS)}\n"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        write_configs(Path(directory))
        anyio.run(main, options.calls, Path(directory))
