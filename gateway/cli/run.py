"""`run` a question through an agent; `resume` a stored run that stopped."""

from __future__ import annotations

import argparse
import sys

from agent import AgentError, AgentItem
from toolkits import ToolkitError

from ..app import open_gateway
from ..console import open_terminal_console
from ..engine import Gateway, RunResult, RunState
from ..errors import GatewayError
from ..store import FileRunStore
from ..trace import new_id
from .common import (
    Commands,
    add_model_options,
    add_trace_options,
    config_of,
    pick_agent,
    print_result,
    refuse_client_sampling,
    trace_hooks,
)

__all__ = ["register"]


def register(commands: Commands) -> None:
    run = commands.add("run", _run, "ask an agent a question and print its answer")
    run.add_argument("question")
    add_model_options(run)
    run.add_argument("--session", help="chat memory session id")
    run.add_argument(
        "--state-dir", help="store the run's state after every step here, to resume it if it stops"
    )
    add_trace_options(run)
    resume = commands.add("resume", _resume, "continue a run stored with --state-dir")
    resume.add_argument("run_id")
    add_model_options(resume, agent=False)
    resume.add_argument("--state-dir", required=True, help="where the run is stored")
    add_trace_options(resume)


async def _run(args: argparse.Namespace) -> int:
    config = config_of(args)
    name = pick_agent(config, args.agent)
    store = FileRunStore(args.state_dir) if args.state_dir else None
    async with (
        open_terminal_console(sys.stdout, sys.stderr) as console,
        open_gateway(config, model=args.model, hooks=trace_hooks(args, console)) as gateway,
    ):
        refuse_client_sampling(gateway, name)
        state = RunState(
            run_id=new_id(),
            agent=name,
            items=[AgentItem(prompt=args.question, session_id=args.session)],
        )
        result = await _stored(gateway, state, store)
    return print_result(result, shown=console.streamed)


async def _resume(args: argparse.Namespace) -> int:
    config = config_of(args)
    store = FileRunStore(args.state_dir)
    state = await store.load(args.run_id)
    async with (
        open_terminal_console(sys.stdout, sys.stderr) as console,
        open_gateway(config, model=args.model, hooks=trace_hooks(args, console)) as gateway,
    ):
        result = await _stored(gateway, state, store)
    return print_result(result, shown=console.streamed)


async def _stored(gateway: Gateway, state: RunState, store: FileRunStore | None) -> RunResult:
    """Run on from `state`; with a store, checkpoint every step and say how to go on after a
    failure (the store keeps the state of the last step that completed)."""
    if store is None:
        return await gateway.resume(state, stream=True)
    await store.save(state)
    try:
        result = await gateway.resume(state, checkpoint=store.save, stream=True)
    except (AgentError, ToolkitError, GatewayError) as exc:
        raise GatewayError(
            f"{exc}\nthe run is stored: agent-gateway resume {state.run_id} "
            f"--state-dir {store.directory}"
        ) from exc
    await store.delete(state.run_id)
    return result
