"""`run` a question through an agent; `resume` a stored run that stopped."""

from __future__ import annotations

import argparse
import io
import json
import sys
from contextlib import AbstractAsyncContextManager

import anyio

from agent import AgentError, AgentItem
from toolkits import ToolkitError

from ..app import open_gateway
from ..console import RunConsole, open_terminal_console
from ..engine import Gateway
from ..errors import GatewayError
from ..run_state import RunResult, RunState
from ..store import FileRunStore
from ..trace import new_id
from .common import (
    Commands,
    add_model_options,
    add_strict_option,
    add_trace_options,
    check_runnable,
    check_servers,
    config_of,
    pick_agent,
    trace_hooks,
    with_steps,
)
from .items import print_items, read_items
from .origin import origin_of, resume_command, resume_config
from .results import print_result
from .runs import add_store_option, run_stored

__all__ = ["register"]


def register(commands: Commands) -> None:
    run = commands.add("run", _run, "ask an agent a question and print its answer")
    run.add_argument("question", nargs="?", help="the question; - reads it from stdin")
    run.add_argument(
        "--items", metavar="FILE", help="many questions, one JSON line each (- for stdin)"
    )
    add_model_options(run)
    run.add_argument("--session", help="chat memory session id")
    run.add_argument(
        "--state-dir", help="store the run's state after every step here, to resume it if it stops"
    )
    add_store_option(run)
    resume = commands.add(
        "resume",
        _resume,
        "continue a run stored with --state-dir, on the config and model it started with",
    )
    resume.add_argument("run_id")
    add_model_options(resume, agent=False, settings=False)
    resume.add_argument("--state-dir", required=True, help="where the run is stored")
    resume.add_argument(
        "--force", action="store_true", help="resume even though the config file changed"
    )
    for sub in (run, resume):
        sub.add_argument(
            "--json",
            action="store_true",
            help="print one JSON object: run_id, output, error, usage, steps",
        )
        add_strict_option(sub)
        add_trace_options(sub)


async def _run(args: argparse.Namespace) -> int:
    items = _items(args)
    config = config_of(args)
    name = pick_agent(config, args.agent)
    store = FileRunStore(args.state_dir) if args.state_dir else None
    state = RunState(
        run_id=new_id(),
        agent=name,
        items=items,
        origin=origin_of(args) if store else None,
    )
    if args.store:
        return await run_stored(args, config, state)
    async with (
        _console(args, items=bool(args.items)) as console,
        open_gateway(
            config,
            model=args.model,
            hooks=trace_hooks(args, console),
            state_dir=args.state_dir,
        ) as gateway,
    ):
        check_runnable(gateway, name)
        result = await _stored(gateway, state, store, args)
    if args.items:
        return print_items(result)
    return print_result(result, as_json=args.json, shown=console.streamed)


def _items(args: argparse.Namespace) -> list[AgentItem]:
    if args.items:
        if args.question is not None or args.session is not None:
            raise GatewayError(
                "--items takes no question and no --session: each line has its own "
                '{"prompt": ..., "session_id": ...}'
            )
        return read_items(args.items)
    if args.question is None:
        raise GatewayError("give a question (or --items FILE)")
    question = sys.stdin.read().strip() if args.question == "-" else args.question
    if not question:
        raise GatewayError("the question is empty")
    return [AgentItem(prompt=question, session_id=args.session)]


async def _resume(args: argparse.Namespace) -> int:
    store = FileRunStore(args.state_dir)
    state = await store.load(args.run_id)
    config, origin = resume_config(args, state.origin, state.agent)
    state = state.model_copy(update={"origin": origin})
    pick_agent(config, state.agent)
    async with (
        _console(args, items=len(state.items) > 1) as console,
        open_gateway(
            config,
            model=origin.model,
            hooks=trace_hooks(args, console),
            state_dir=args.state_dir,
        ) as gateway,
    ):
        check_runnable(gateway, state.agent)
        result = await _stored(gateway, state, store, args)
    if len(state.items) > 1:
        return print_items(result)
    return print_result(result, as_json=args.json, shown=console.streamed)


async def _stored(
    gateway: Gateway, state: RunState, store: FileRunStore | None, args: argparse.Namespace
) -> RunResult:
    """Run on from `state`; with a store, checkpoint every step and say how to go on after a
    failure (the store keeps the state of the last step that completed)."""
    if args.json:
        with_steps(gateway, state.agent)
    try:
        check_servers(gateway, strict=args.strict)
        if store is None:
            return await gateway.resume(state, stream=True)
        await store.save(state)
        try:
            result = await gateway.resume(state, checkpoint=store.save, stream=True)
        except (AgentError, ToolkitError, GatewayError) as exc:
            exc.add_note(f"the run is stored: {resume_command(state.run_id, store.directory)}")
            raise
        except anyio.get_cancelled_exc_class():  # Ctrl-C, or a signal: say how to go on
            hint = resume_command(state.run_id, store.directory)
            print(f"\ninterrupted: run {state.run_id} is stored: {hint}", file=sys.stderr)
            raise
    except (AgentError, ToolkitError, GatewayError) as exc:
        if args.json:  # still one JSON object on stdout, for scripts
            print(json.dumps({"run_id": state.run_id, "agent": state.agent, "error": str(exc)}))
        raise
    await store.delete(state.run_id)
    return result


def _console(
    args: argparse.Namespace, *, items: bool = False
) -> AbstractAsyncContextManager[RunConsole]:
    """The live console on the terminal; with `--json` or many items, stdout carries the JSON
    alone."""
    quiet = args.json or items
    return open_terminal_console(io.StringIO() if quiet else sys.stdout, sys.stderr)
