"""What MCP toolkit nodes cost: start-up with 1 and 10 stdio servers, and per-call overhead.

    .ci/install-servers && python bench/mcp_overhead.py [--calls 500] [--rounds 3]

1. Time to first tools/list: entering an `McpToolkitGroup` of N server-everything processes
   (connected concurrently) and listing every node's tools, N = 1 and 10; median of rounds.
2. Per-call overhead: the same `echo` call through `McpToolkit.call_tool` and through a bare
   SDK `Client` on its own session to the same server, interleaved in blocks; medians and
   their ratio. Once over stdio (server-everything) and once in-process (a low-level SDK
   `Server`, where no IPC hides the node's own cost).
3. Raw calls: the same node's `call_tool` as raw JSON-RPC (`McpToolkit.raw_calls`, the
   default) and through the SDK client, alternating in blocks: this process's CPU and the
   wall time per call, against the benchmark downstream (`bench/downstream.py`) over HTTP in
   both protocol eras, and server-everything over stdio.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server import Server

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script from anywhere

from bench._processes import running  # noqa: E402
from bench.downstream import READY as DOWNSTREAM_READY  # noqa: E402
from toolkits.mcp import McpServerConfig, McpToolkit, McpToolkitGroup  # noqa: E402

EVERYTHING = (
    REPO / ".servers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)
BLOCK = 50


def everything_params() -> tuple[str, list[str]]:
    node = shutil.which("node")
    if node is None or not EVERYTHING.exists():
        sys.exit("server-everything is not installed: run .ci/install-servers")
    return node, [str(EVERYTHING), "stdio"]


def echo_server() -> Server[Any]:
    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        schema = {"type": "object", "properties": {"message": {"type": "string"}}}
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema=schema)])

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        message = (params.arguments or {}).get("message", "")
        return types.CallToolResult(content=[types.TextContent(text=f"Echo: {message}")])

    return Server("bench", on_list_tools=list_tools, on_call_tool=call_tool)


async def time_to_first_list(count: int, rounds: int) -> float:
    command, args = everything_params()
    configs = {f"s{i}": McpServerConfig(command=command, args=args) for i in range(count)}
    samples: list[float] = []
    for _ in range(rounds):
        started = time.perf_counter()
        async with McpToolkitGroup(configs) as group:
            tools = await group.list_tools()
            samples.append(time.perf_counter() - started)
            failed = [h for h in group.health.values() if h.state != "ready"]
            if failed:
                sys.exit(f"servers failed to start: {failed}")
            assert len(tools) >= count
    return statistics.median(samples)


async def compare_calls(node: McpToolkit, client: Client, calls: int) -> tuple[float, float]:
    """Median seconds per echo call: (node, bare client), interleaved in blocks of BLOCK."""
    arguments = {"message": "bench"}
    via_node: list[float] = []
    via_client: list[float] = []

    async def timed(call: Callable[[], Awaitable[Any]], into: list[float]) -> None:
        for _ in range(BLOCK):
            started = time.perf_counter()
            await call()
            into.append(time.perf_counter() - started)

    async def node_call() -> Any:
        return await node.call_tool(f"{node.name}__echo", arguments)

    async def client_call() -> Any:
        return await client.call_tool("echo", arguments)

    await timed(node_call, [])  # warm both paths up
    await timed(client_call, [])
    for _ in range(max(1, calls // BLOCK)):
        await timed(node_call, via_node)
        await timed(client_call, via_client)
    return statistics.median(via_node), statistics.median(via_client)


async def per_call_stdio(calls: int) -> tuple[float, float]:
    command, args = everything_params()
    config = McpServerConfig(command=command, args=args)
    async with (
        McpToolkit("everything", config) as node,
        Client(StdioServerParameters(command=command, args=args), cache=None) as client,
    ):
        await client.list_tools()  # as the node did: lets the SDK validate outputs alike
        return await compare_calls(node, client, calls)


async def per_call_in_process(calls: int) -> tuple[float, float]:
    server = echo_server()
    async with (
        McpToolkit("bench", McpServerConfig(command="in-process"), target=server) as node,
        Client(server, cache=None) as client,
    ):
        await client.list_tools()
        return await compare_calls(node, client, calls)


async def raw_against_sdk(node: McpToolkit, tool: str, calls: int) -> dict[bool, list[float]]:
    """Median (CPU, wall) seconds per call of `tool` with `raw_calls` on and off, the two
    alternating in blocks of BLOCK."""
    arguments = {"message": "x" * 200}
    samples: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
    for turn in range(2 + 2 * max(1, calls // BLOCK)):
        raw = turn % 2 == 0
        node.raw_calls = raw
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(BLOCK):
            result = await node.call_tool(tool, arguments)
            assert not result.is_error, result
        if turn >= 2:  # the first pair warms both ways up
            samples[raw].append(
                ((time.process_time() - cpu) / BLOCK, (time.perf_counter() - wall) / BLOCK)
            )
    return {
        raw: [statistics.median(figure) for figure in zip(*blocks, strict=True)]
        for raw, blocks in samples.items()
    }


async def raw_calls(calls: int) -> None:
    downstream = [sys.executable, str(REPO / "bench" / "downstream.py"), "--http"]
    async with running(downstream, ready=DOWNSTREAM_READY) as down:
        for protocol in ("modern", "legacy"):
            config = McpServerConfig(url=f"{down.url}/mcp", protocol=protocol)
            async with McpToolkit("d", config) as node:
                _report_raw(f"HTTP, {protocol}", await raw_against_sdk(node, "d__echo", calls))
    command, args = everything_params()
    async with McpToolkit("everything", McpServerConfig(command=command, args=args)) as node:
        figures = await raw_against_sdk(node, "everything__echo", calls)
        _report_raw("stdio", figures)


def _report_raw(label: str, figures: dict[bool, list[float]]) -> None:
    (raw_cpu, raw_wall), (sdk_cpu, sdk_wall) = figures[True], figures[False]
    print(
        f"  {label:13s}: raw CPU {ms(raw_cpu)} wall {ms(raw_wall)}   SDK client CPU "
        f"{ms(sdk_cpu)} wall {ms(sdk_wall)}   CPU {raw_cpu / sdk_cpu:5.2f}x",
        flush=True,
    )


def ms(seconds: float) -> str:
    return f"{seconds * 1000:8.3f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500, help="calls per path (default 500)")
    parser.add_argument("--rounds", type=int, default=3, help="start-up rounds (default 3)")
    options = parser.parse_args()

    print("time to first tools/list (server-everything over stdio, concurrent connect, median)")
    for count in (1, 10):
        print(
            f"  {count:2d} server{'s' if count > 1 else ' '}: {ms(await time_to_first_list(count, options.rounds))}"
        )

    print(f"per-call overhead (echo, median of {options.calls} calls per path)")
    for label, measure in (("stdio", per_call_stdio), ("in-process", per_call_in_process)):
        via_node, via_client = await measure(options.calls)
        print(
            f"  {label:10s}: node {ms(via_node)}   bare Client {ms(via_client)}   "
            f"overhead {ms(via_node - via_client)}   ratio {via_node / via_client:5.2f}x"
        )

    print(f"raw calls against the SDK client's way (echo, {options.calls} calls each)")
    await raw_calls(options.calls)


if __name__ == "__main__":
    anyio.run(main)
