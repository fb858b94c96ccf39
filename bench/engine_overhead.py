"""What the engine costs per run, against a direct tool call and against a peer, in one run.

A run is the seed's loop: the model asks for `calculator(17 * 25)`, the tool runs, the model
answers. Models are scripted (no network), so the numbers are the frameworks' own overhead.

    .venv/bin/python bench/engine_overhead.py [--runs 2000]

Peer: pydantic-ai's `Agent` with a `FunctionModel` doing the same two turns (skipped when
`pydantic-ai-slim` is not installed: `pip install -e '.[bench]'`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable

import anyio

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway
from toolkits import FunctionToolkit, calculator
from toolkits.calculator import evaluate

SCRIPT = [
    ScriptedAnswer(
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "17 * 25"})]
    ),
    ScriptedAnswer(content="425"),
]


async def timed(runs: int, once: Callable[[], Awaitable[object]]) -> list[float]:
    for _ in range(min(50, runs)):  # warm up imports, caches, pydantic validators
        await once()
    samples: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        await once()
        samples.append((time.perf_counter() - start) * 1e6)
    return samples


async def direct() -> object:
    return evaluate("17 * 25")


async def tool_node() -> object:
    return await calculator({"expression": "17 * 25"})


def gateway_run() -> Callable[[], Awaitable[object]]:
    node = FunctionToolkit("calculator", [calculator])

    async def once() -> object:
        spec = AgentSpec(name="a", model=ScriptedModel(SCRIPT), tools=["calculator"])
        result = await Gateway([node], [spec]).run("a", "What is 17 * 25?")
        assert result.output == "425"
        return result

    return once


def pydantic_ai_run() -> Callable[[], Awaitable[object]] | None:
    try:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("calculator", {"expression": "17 * 25"})])
        return ModelResponse(parts=[TextPart("425")])

    peer: Agent[None, str] = Agent(FunctionModel(respond))

    @peer.tool_plain
    def calculator(expression: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Evaluate an arithmetic expression."""
        return str(evaluate(expression))

    async def once() -> object:
        result = await peer.run("What is 17 * 25?")
        assert result.output == "425"
        return result

    return once


async def main(runs: int) -> None:
    cases: dict[str, Callable[[], Awaitable[object]]] = {
        "direct evaluate()": direct,
        "calculator tool node": tool_node,
        "agent-gateway run": gateway_run(),
    }
    peer = pydantic_ai_run()
    if peer is not None:
        cases["pydantic-ai Agent.run"] = peer
    results = {name: statistics.median(await timed(runs, once)) for name, once in cases.items()}
    base = results["agent-gateway run"]
    print(f"{'case':<24} {'p50 us':>10} {'vs gateway':>11}")
    for name, p50 in results.items():
        print(f"{name:<24} {p50:>10.1f} {p50 / base:>10.2f}x")
    if peer is None:
        print("(pydantic-ai not installed: pip install -e '.[bench]' to compare)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2000)
    anyio.run(main, parser.parse_args().runs)
