"""`run` a question through an agent; `resume` a stored run that stopped.

Runs are kept in the run store by default (see `stored`): one that stops (its model down, a
crash, Ctrl-C) says how to resume it.
"""

from __future__ import annotations

import argparse

import anyio

from agent import AgentError, AgentItem
from toolkits import ToolkitError

from ..approval import NOT_STORED
from ..assembly import open_gateway
from ..call_info import with_context
from ..errors import GatewayError
from ..run_state import RunState
from ..trace import new_id
from .common import (
    Commands,
    add_context_option,
    add_model_options,
    check_memory_kept,
    check_runnable,
    check_servers,
    check_session_id,
    config_of,
    pick_agent,
    read_context,
    with_steps,
)
from .exits import BAD_INPUT, exit_code
from .items import read_items
from .origin import origin_of
from .results import print_result
from .stdin_text import read_stdin
from .stored import (
    add_output_options,
    add_resume_options,
    add_store_options,
    interrupted_at_start,
    item_lines,
    print_stopped,
    resume_stored,
    run_hooks,
    run_stored,
    store_url,
    terminal_console,
)

__all__ = ["register"]


def register(commands: Commands) -> None:
    run = commands.add("run", _run)
    run.add_argument("question", nargs="?", help="the question; - reads it from stdin")
    run.add_argument(
        "--items", metavar="FILE", help="many questions, one JSON line each (- for stdin)"
    )
    add_model_options(run)
    run.add_argument("--session", metavar="ID", help="chat memory session id")
    add_context_option(run, "; with --items, each item's that has none")
    add_store_options(run, optional=True)
    add_output_options(run)
    resume = commands.add("resume", resume_stored)
    add_resume_options(resume)


async def _run(args: argparse.Namespace) -> int:
    items = await _items(args)
    config = config_of(args)
    name = pick_agent(config, args.agent)
    url = store_url(args, config)
    state = RunState(
        run_id=new_id(), agent=name, items=items, origin=origin_of(args) if url else None
    )
    if url is not None:
        return await run_stored(args, config, state, url)
    if any(item.session_id is not None for item in items):
        check_memory_kept(config, name)
    lines = item_lines(args, state, stored=False) if args.items else None
    async with (
        interrupted_at_start(args, lines, state, status="failed", run_id=None) as began,
        terminal_console(args, items=bool(args.items)) as console,
        open_gateway(
            config,
            model=args.model,
            hooks=run_hooks(args, console, lines),
            # Servers the agent does not use start meanwhile (--strict checks every one).
            wait_for=None if args.strict else config.nodes_of(name),
            on_waiting=console.waiting_for,
        ) as gateway,
    ):
        began()
        check_runnable(gateway, name)
        try:
            check_servers(gateway, strict=args.strict)
            if args.json:
                with_steps(gateway, name)
            result = await gateway.resume(state, stream=True, approver=NOT_STORED)
        except (AgentError, ToolkitError, GatewayError) as exc:
            if args.json and exit_code(exc) != BAD_INPUT:  # one JSON object, for scripts
                # No run id: none was stored.
                print_stopped(args, lines, state, exc, None, status="failed", run_id=None)
            raise
        except anyio.get_cancelled_exc_class():  # Ctrl-C, a signal: nothing was stored
            # What finished of many items is out: the run's line says the rest; of one
            # question, the one JSON object `--json` promises (each only with `--json`).
            interrupted = GatewayError("interrupted: the run was not stored (--no-store)")
            print_stopped(args, lines, state, interrupted, None, status="failed", run_id=None)
            raise
        # Said before the servers stop (a stdio server may take its 2 s grace to exit): a
        # script reading the answer need not wait for them; the exit code does.
        if lines is not None:
            return lines.finished(result)
        return print_result(result, as_json=args.json, stored=False, shown=console.streamed)


async def _items(args: argparse.Namespace) -> list[AgentItem]:
    context = read_context(args.context) if args.context is not None else None
    return with_context(await _questions(args), context)


async def _questions(args: argparse.Namespace) -> list[AgentItem]:
    if args.items:
        if args.question is not None or args.session is not None:
            raise GatewayError(
                "--items takes no question and no --session: each line has its own "
                '{"prompt": ..., "session_id": ...}'
            )
        return await read_items(args.items)
    if args.question is None:
        raise GatewayError("give a question (or --items FILE)")
    session = check_session_id(args.session) if args.session is not None else None
    question = (await read_stdin("the question")).strip() if args.question == "-" else args.question
    if not question:
        raise GatewayError("the question is empty")
    return [AgentItem(prompt=question, session_id=session)]
