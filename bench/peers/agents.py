"""The agent workload: agent-gateway's agents with scripted models, served as MCP tools.

- `fanout`: `agent_turns` turns, each asking for `agent_fanout` parallel `sleep(agent_sleep_ms)`
  calls, then the answer. The critical path is turns x sleep (250 ms). The direct arms make the
  same calls themselves, turn by turn: the floor for any agent.
- `loop` and `answer`, on a server of `wide_tools` tools: `loop` calls echo once per iteration
  for `overhead_iterations` iterations, `answer` answers at once; `overhead_runs` turns of
  both and of as many direct echo calls (over the same transport, in the node's protocol era).
  Agent overhead per iteration = (loop - answer) / iterations - a direct echo (medians).

Peers have no agents: n/a.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench._processes import REPO

from .arms import DOWNSTREAM, PYTHON, Arm, Env, Stack
from .measure import ECHO, Figures, NotApplicable, call_ok, timed
from .sizes import Sizes

__all__ = ["agent", "agent_config"]

DONE = "done"


def _script(path: Path, answers: list[dict[str, Any]]) -> str:
    path.write_text(json.dumps(answers))
    return f"scripted:{path}"


def agent_config(workdir: Path, sizes: Sizes) -> str:
    """The [agents] tables of our arms' config, with scripts for every run of one round."""
    workdir.mkdir(parents=True, exist_ok=True)
    runs = 1 + sizes.agent_runs  # a warm-up run first
    overhead_runs = 1 + sizes.overhead_runs

    # Every call differs (`note`, the message): the engine answers a repeated identical call
    # from the conversation instead of calling the tool again.
    def sleeps(turn: int) -> dict[str, Any]:
        calls = [
            {"name": "d__sleep", "arguments": {"ms": sizes.agent_sleep_ms, "note": f"{turn}.{i}"}}
            for i in range(sizes.agent_fanout)
        ]
        return {"tool_calls": calls}

    def echo(iteration: int) -> dict[str, Any]:
        message = f"{iteration:04d}{ECHO['message'][4:]}"
        return {"tool_calls": [{"name": "wide__echo", "arguments": {"message": message}}]}

    turns = range(sizes.agent_turns)
    fanout = ([sleeps(t) for t in turns] + [{"content": DONE}]) * runs
    iterations = range(sizes.overhead_iterations)
    loop = ([echo(i) for i in iterations] + [{"content": DONE}]) * overhead_runs
    answer = [{"content": DONE}] * overhead_runs
    tables = ""
    for name, tools, answers in (
        ("fanout", "d", fanout),
        ("loop", "wide", loop),
        ("answer", "wide", answer),
    ):
        model = _script(workdir / f"{name}.json", answers)
        tables += (
            f"[agents.{name}]\nmodel = {json.dumps(model)}\ntools = [{json.dumps(tools)}]\n"
            f"max_iterations = {sizes.overhead_iterations + sizes.agent_turns + 2}\n"
        )
    return tables


async def agent(arm: Arm, stack: Stack | None, env: Env) -> Figures:
    assert stack is not None
    sizes = env.sizes
    if arm.kind == "direct":
        run_ms = await _client_fanout(stack, sizes)
        return {
            "run_ms": run_ms,
            "vs_critical": run_ms / sizes.critical_path_ms,
            "overhead_ms": None,
        }
    if not arm.ours:
        raise NotApplicable("a proxy: no agents")
    runs = {"fanout": sizes.agent_runs, "loop": sizes.overhead_runs, "answer": sizes.overhead_runs}
    times: dict[str, list[float]] = {name: [] for name in runs}
    direct_ms: list[float] = []
    async with _direct_client(arm, env) as direct:
        for run in range(1 + max(runs.values())):
            for name, samples in times.items():
                if run > runs[name]:
                    continue
                started = time.perf_counter()
                result = await call_ok(stack.client, name, {"prompt": "go"})
                elapsed = (time.perf_counter() - started) * 1000
                if DONE not in str(result.content):
                    raise RuntimeError(f"agent {name} answered {result.content}")
                if run:  # the first is a warm-up
                    samples.append(elapsed)
            if run <= sizes.overhead_runs:  # the direct calls, in the same turns
                echoes = await timed(direct, "echo", ECHO, sizes.overhead_iterations)
                if run:
                    direct_ms += echoes
    run_ms = statistics.median(times["fanout"])
    per_iteration = (
        statistics.median(times["loop"]) - statistics.median(times["answer"])
    ) / sizes.overhead_iterations
    return {
        "run_ms": run_ms,
        "vs_critical": run_ms / sizes.critical_path_ms,
        "overhead_ms": per_iteration - statistics.median(direct_ms),
    }


async def _client_fanout(stack: Stack, sizes: Sizes) -> float:
    """The fan-out's calls made by the client itself, turn by turn; median ms."""
    sleep = stack.tools["sleep"]
    walls: list[float] = []
    for _ in range(1 + sizes.agent_runs):
        started = time.perf_counter()
        for _turn in range(sizes.agent_turns):
            async with anyio.create_task_group() as tg:
                for _ in range(sizes.agent_fanout):
                    tg.start_soon(call_ok, stack.client, sleep, {"ms": sizes.agent_sleep_ms})
        walls.append((time.perf_counter() - started) * 1000)
    return statistics.median(walls[1:])


def _direct_client(arm: Arm, env: Env) -> Client:
    """A client of the wide server, over the transport and in the protocol era the gateway's
    node uses: the SDK's server lists its 100 tools for every 2026-07-28 call, so such a call
    waits 1.2-1.7 ms longer here than one on a handshake-era session, which a direct call in
    the other era would take off the agent's figure or add to it (bench/RESULTS.md, item 39).
    """
    target: str | StdioServerParameters = f"{env.downstream}/wide/mcp"
    if arm.stdio:
        args = [DOWNSTREAM, "--stdio", "--tools", str(env.sizes.wide_tools)]
        target = StdioServerParameters(command=PYTHON, args=args, cwd=REPO)
    mode = "auto" if arm.protocol == "modern" else "legacy"  # a node's default: the handshake
    return Client(target, mode=mode, cache=None)
