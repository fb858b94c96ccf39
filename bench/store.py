"""What the run store costs: one step's records on SQLite and PostgreSQL, and a whole agent
step with and without a store.

    .venv/bin/python -m bench store [--steps 60] [--postgres URL]

- *checkpoint*: inside a DBOS workflow, a checkpoint step of 4 KB (what every step writes
  once: the chunks of the state it added and the skeleton naming them, `durable.checkpoints`)
  and one call recorded as a DBOS step (what every model and tool call does); p50 of
  `--steps` each.
- *agent step*: a scripted model asks for one tool call per step, `--steps` steps, then
  answers. The tool notes the time it is called, so a step is the time between two calls (a
  model call, its record, the tool's record, the checkpoint); p50 of the steps, in-process,
  without a store and on each store. The overhead is stored minus not stored. *cpu*: the
  process's CPU time per step (its threads' too), which a loaded machine moves less.

Without `--postgres`, a PostgreSQL 15 is started for the run (as `tests/` do: a temp dir on
127.0.0.1, fsync off; as root, as the user `pgtest`).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import time
import uuid
from collections.abc import Generator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import anyio
from dbos import DBOS

from agent import AgentItem, AgentOptions, ScriptedAnswer, ScriptedCall, ScriptedModel
from gateway import AgentSpec, Gateway, RunState
from gateway.durable import open_runs
from gateway.durable.status import CHECKPOINT_STEP
from gateway.trace import new_id
from toolkits import FunctionToolkit, function_tool

CHECKPOINT_SIZE = 4000
"""About the most a checkpoint of a step with a short tool result writes (bytes of JSON)."""


@DBOS.workflow(name="agent-gateway.bench-records")
async def _records(steps: int, state: str) -> list[list[float]]:
    """Times `steps` checkpoints and `steps` recorded steps, in ms."""
    events: list[float] = []
    calls: list[float] = []

    async def answer() -> str:
        return "done"

    async def checkpoint() -> str:
        return state

    for index in range(steps):
        start = time.perf_counter()
        await DBOS.run_step_async({"name": CHECKPOINT_STEP}, checkpoint)
        events.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        await DBOS.run_step_async({"name": f"tool 0 c{index}"}, answer)
        calls.append((time.perf_counter() - start) * 1000)
    return [events, calls]


def _spec(steps: int, ticks: list[float]) -> tuple[FunctionToolkit, AgentSpec]:
    @function_tool
    async def tick(n: int) -> str:
        """Note the time (one call per agent step)."""
        ticks.append(time.perf_counter())
        return f"tick {n}"

    answers = [
        ScriptedAnswer(tool_calls=[ScriptedCall(name="tick", arguments={"n": n})])
        for n in range(steps)
    ]
    model = ScriptedModel([*answers, ScriptedAnswer(content="done")])
    options = AgentOptions(max_iterations=steps + 1)
    return FunctionToolkit("ticks", [tick]), AgentSpec(
        name="a", model=model, tools=["ticks"], options=options
    )


def _step_ms(ticks: list[float]) -> list[float]:
    return [(b - a) * 1000 for a, b in itertools.pairwise(ticks)]


async def plain_steps(steps: int) -> tuple[list[float], float]:
    """(agent step ms, CPU ms per step) without a store."""
    ticks: list[float] = []
    node, spec = _spec(steps, ticks)
    start = time.process_time()
    result = await Gateway([node], [spec]).run("a", "tick")
    cpu = (time.process_time() - start) * 1000 / steps
    assert result.output == "done"
    return _step_ms(ticks), cpu


async def stored(url: str, steps: int) -> tuple[list[float], list[float], list[float], float]:
    """(checkpoint ms, recorded call ms, agent step ms, CPU ms per step) on the store at
    `url`."""
    ticks: list[float] = []
    node, spec = _spec(steps, ticks)
    async with open_runs(url) as runs:
        handle = await DBOS.start_workflow_async(_records, steps, "x" * CHECKPOINT_SIZE)
        events, calls = await handle.get_result()
        runs.use(Gateway([node], [spec]))
        state = RunState(run_id=new_id(), agent="a", items=[AgentItem(prompt="tick")])
        start = time.process_time()
        result = await runs.start(state)
        cpu = (time.process_time() - start) * 1000 / steps
        assert result.output == "done"
    return events, calls, _step_ms(ticks), cpu


@contextmanager
def _postgres(given: str | None) -> Generator[str]:
    if given is not None:
        yield given
        return
    from tests.servers.databases import postgres_server

    with postgres_server() as url:
        yield url


def _p50(samples: list[float]) -> float:
    return statistics.median(samples)


async def main(steps: int, postgres: str | None) -> None:
    with ExitStack() as stack:
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server = stack.enter_context(_postgres(postgres))
        stores = {
            "sqlite": f"sqlite:///{directory / 'runs.sqlite3'}",
            "postgresql": f"{server.rsplit('/', 1)[0]}/bench_{uuid.uuid4().hex[:8]}",
        }
        await plain_steps(steps)  # warm up imports and validators
        plain_ms, plain_cpu = await plain_steps(steps)
        plain = _p50(plain_ms)
        print(f"{steps} steps each, p50 in ms (2 shared cores; load varies)")
        print(
            f"{'store':<12} {'checkpoint':>12} {'call record':>12} {'agent step':>11} "
            f"{'overhead':>9} {'cpu':>6}"
        )
        print(f"{'none':<12} {'':>12} {'':>12} {plain:>11.2f} {'':>9} {plain_cpu:>6.2f}")
        for name, url in stores.items():
            events, calls, agent_steps, cpu = await stored(url, steps)
            step = _p50(agent_steps)
            print(
                f"{name:<12} {_p50(events):>12.2f} {_p50(calls):>12.2f} {step:>11.2f} "
                f"{step - plain:>+9.2f} {cpu:>6.2f}"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--postgres", metavar="URL", help="a PostgreSQL server to use")
    arguments = parser.parse_args()
    anyio.run(main, max(arguments.steps, 2), arguments.postgres)
