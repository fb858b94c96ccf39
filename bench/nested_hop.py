"""What one nested hop costs: gateway A's agent calling gateway B's agent, vs calling B directly.

    python bench/nested_hop.py [--runs 200]

B is `agent-gateway serve` on a config whose `math` agent (a scripted model) calls the
calculator once and answers. Over stdio, then over HTTP on 127.0.0.1, each of these runs
`--runs` times (after a warm-up), interleaved in blocks:

1. direct: an SDK `Client` calls B's `math` tool, without a progress callback, then with one
   (a gateway's node always asks for progress, so B sends a notification per model/tool call);
2. A's node: gateway A, in this process, calls `b__math` with `Gateway.call_tool` (A's engine
   and MCP node, no agent of A);
3. A's agent: A's `assistant` (a scripted model, in this process) calls `b__math` and answers,
   i.e. A -> B -> calculator, the whole nested hop.

Times are per call, p50 and p90 in ms; the models are scripted, so what is left is the cost of
the engines, the MCP hops and the processes.
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

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel  # noqa: E402
from bench._processes import http_process  # noqa: E402
from gateway import Gateway  # noqa: E402
from gateway.assembly import open_gateway  # noqa: E402
from gateway.config import Config, parse_config  # noqa: E402

SCRIPT = Path(sys.executable).parent / "agent-gateway"
WARMUP = 20
BLOCK = 25
PROMPT = {"prompt": "17 * 25"}

Call = Callable[[], Awaitable[None]]


def math_answers(runs: int) -> list[dict[str, Any]]:
    """B's script: per run, a calculator call and the answer."""
    one = [
        {"tool_calls": [{"name": "calculator", "arguments": {"expression": "17 * 25"}}]},
        {"content": "425"},
    ]
    return one * runs


def assistant_model(runs: int) -> ScriptedModel:
    """A's script: per run, a call of B's agent and the answer."""
    call = ScriptedAnswer(tool_calls=[ScriptedCall(name="b__math", arguments=dict(PROMPT))])
    return ScriptedModel([call, ScriptedAnswer(content="425")] * runs, name="assistant")


def write_b(workdir: Path, runs: int) -> Path:
    (workdir / "math.json").write_text(json.dumps(math_answers(runs)))
    config = workdir / "b.toml"
    config.write_text(
        '[tools.calculator]\nbuiltin = "calculator"\n'
        '[agents.math]\nmodel = "scripted:math.json"\ntools = ["calculator"]\n'
    )
    return config


async def compare(cases: dict[str, Call], runs: int) -> dict[str, list[float]]:
    """Each case `runs` times after WARMUP, interleaved in blocks; ms per call."""
    for call in cases.values():
        for _ in range(WARMUP):
            await call()
    times: dict[str, list[float]] = {label: [] for label in cases}
    for _ in range(max(1, runs // BLOCK)):
        for label, call in cases.items():
            for _ in range(BLOCK):
                started = time.perf_counter()
                await call()
                times[label].append((time.perf_counter() - started) * 1000)
    return times


def report(times: dict[str, list[float]], baseline: str) -> None:
    base = statistics.median(times[baseline])
    for label, samples in times.items():
        p50 = statistics.median(samples)
        p90 = statistics.quantiles(samples, n=10)[-1]
        extra = f"  (+{p50 - base:7.3f} ms over {baseline})" if label != baseline else ""
        print(f"  {label:<26} p50 {p50:8.3f} ms   p90 {p90:8.3f} ms{extra}", flush=True)


def cases(client: Client, gateway: Gateway, model: ScriptedModel) -> dict[str, Call]:
    async def ignore(progress: float, total: float | None, message: str | None) -> None:
        pass

    async def direct() -> None:
        result = await client.call_tool("math", PROMPT)
        assert not result.is_error, result.content

    async def direct_progress() -> None:
        result = await client.call_tool("math", PROMPT, progress_callback=ignore)
        assert not result.is_error, result.content

    async def node() -> None:
        result = await gateway.call_tool("b__math", PROMPT)
        assert not result.is_error, result.content

    async def agent() -> None:
        result = await gateway.run("assistant", "17 * 25?", model=model)
        assert result.output == "425", result.error

    return {
        "direct": direct,
        "direct, with progress": direct_progress,
        "A's node (call_tool)": node,
        "A's agent (A -> B -> tool)": agent,
    }


def gateway_a(b: dict[str, Any]) -> Config:
    """A: B as the server `b`, and an `assistant` on it (its model is passed per run)."""
    return parse_config({"mcpServers": {"b": b}, "agents": {"assistant": {"tools": ["b"]}}})


async def over_stdio(b_config: Path, runs: int) -> None:
    print("stdio (A starts its own B; the direct client another)")
    args = ["serve", "--stdio", "--config", str(b_config)]
    stdio = StdioServerParameters(command=str(SCRIPT), args=args, cwd=REPO)
    a = gateway_a({"command": str(SCRIPT), "args": args, "cwd": str(REPO)})
    async with Client(stdio, cache=None) as client, open_gateway(a) as gateway:
        model = assistant_model(WARMUP + runs)
        report(await compare(cases(client, gateway, model), runs), "direct")


async def over_http(b_config: Path, runs: int) -> None:
    print("HTTP on 127.0.0.1 (one B for both)")
    command = [str(SCRIPT), "serve", "--http", "127.0.0.1:0", "--config", str(b_config)]
    async with (
        http_process(command) as url,
        Client(url, cache=None) as client,
        open_gateway(gateway_a({"url": url})) as gateway,
    ):
        model = assistant_model(WARMUP + runs)
        report(await compare(cases(client, gateway, model), runs), "direct")


async def main(runs: int, workdir: Path) -> None:
    runs = max(BLOCK, runs // BLOCK * BLOCK)
    print(
        f"{runs} runs per case after {WARMUP} warm-up runs, blocks of {BLOCK}; {os.cpu_count()} CPUs"
    )
    # B answers every case of one transport from one script (HTTP: one process for all).
    b_config = write_b(workdir, 4 * (WARMUP + runs))
    await over_stdio(b_config, runs)
    await over_http(b_config, runs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        anyio.run(main, options.runs, Path(directory))
