"""The `agent-gateway` command line: a thin layer over the library.

Each command lives in its own module with a `register(commands)` function that adds its
subparser and handler; a new command is one module and one entry in `commands.COMMANDS`.
Only the chosen command's module is imported, after the command line is read: `--version`,
`--help` and a mistyped command load none of the library.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import inspect
import os
import signal
import sys
import threading
from collections.abc import Sequence
from contextlib import nullcontext
from importlib.metadata import PackageNotFoundError, version
from typing import Any

# From the modules that define them, not the packages: a package whose __init__.py another
# distribution replaced still lets the command line start and say so (agent_gateway.shadowing).
from agent.errors import AgentError
from toolkits.errors import ToolkitError

from ..errors import GatewayError
from .commands import COMMANDS, Commands
from .exits import BAD_INPUT, FAILED, INTERRUPTED, exit_code, report
from .startup import own_process_ready

__all__ = ["COMMANDS", "main", "parse", "parser"]


def event_loop_options() -> dict[str, Any]:
    """uvloop where it is installed: a proxied call costs ~25 % less CPU than on asyncio's own
    loop (bench/RESULTS.md). `AGENT_GATEWAY_EVENT_LOOP=asyncio` keeps asyncio's."""
    wanted = os.environ.get("AGENT_GATEWAY_EVENT_LOOP", "uvloop")
    return {"use_uvloop": wanted == "uvloop" and importlib.util.find_spec("uvloop") is not None}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv`; None: this process's own (the `agent-gateway` command),
    which is set up first (`startup`: closed stdio, encodings, the command line's text)."""
    own_process = argv is None
    if own_process:
        try:
            argv = own_process_ready(sys.argv[1:])
        except GatewayError as exc:
            report(exc)
            return BAD_INPUT
    try:
        code = _main(argv, own_process=own_process)
    except KeyboardInterrupt:  # while the command's modules import (a second or so)
        code = INTERRUPTED
    if own_process:
        code, leave = _threads_left(code)
        if leave:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code


INTERRUPTED_CODES = (INTERRUPTED, 128 + signal.SIGTERM, 128 + signal.SIGHUP)
LEAVING_CODES = (FAILED, *INTERRUPTED_CODES)
"""Exits that leave work behind unfinished: threads still running are not waited for."""


def _threads_left(code: int) -> tuple[int, bool]:
    """The exit code, and whether to leave at once rather than wait for the threads still
    running, as the interpreter's exit would. A blocking local tool's thread cannot be
    stopped: a call given up on (cancelled: a signal, chat's Ctrl-C; timed out) ended, and its
    thread is left to finish alone (`running_threads`). After an exit that leaves work behind,
    no thread is waited for (nor DBOS's, retrying a store that went away until its backoff,
    up to a minute, ends); else the others are, here, where Ctrl-C exits 130 quietly."""
    if code in LEAVING_CODES:
        return code, bool(_others())
    functions: Any = sys.modules.get("toolkits.function")  # not loaded: no local tool ran
    given_up: frozenset[threading.Thread] = (
        functions.running_threads() if functions is not None else frozenset()
    )
    try:
        while waited := [thread for thread in _others() if thread not in given_up]:
            for thread in waited:
                thread.join()
    except KeyboardInterrupt:
        return INTERRUPTED, True
    return code, bool(_others())


def _others() -> list[threading.Thread]:
    """The threads the interpreter's exit would wait for."""
    main_thread = threading.main_thread()
    return [t for t in threading.enumerate() if t is not main_thread and not t.daemon]


def _main(argv: Sequence[str], *, own_process: bool) -> int:
    if own_process:
        # What the imports made lives as long as the process: left to the collector, every
        # full collection while the nodes connect walks it again and frees nothing of it (50
        # servers: three such collections, ~100 ms of a 1.2 s start; bench/RESULTS.md). Only
        # for a process of our own: a caller's objects are not ours to keep forever.
        gc.freeze()
    args = parse(list(argv))
    if args is None:
        return BAD_INPUT
    args.own_process = own_process  # signals after the first are ours to ignore till exit
    from ..otel_export import export_at_exit
    from .log_lines import setup_logging

    setup_logging(args.verbose, serving=args.log_times)
    with export_at_exit():  # spans are exported after the answer (or the error) is printed
        return _handle(args)


def _handle(args: argparse.Namespace) -> int:
    import anyio

    from .common import check_state_dir
    from .output import stdout_for_results
    from .signals import until_signalled

    try:
        check_state_dir(args)
        # What a command runs may print (a local tool): stdout is kept for the result.
        with stdout_for_results() if args.stdout_is_result else nullcontext():
            if not inspect.iscoroutinefunction(args.handler):
                return args.handler(args)
            options = event_loop_options()
            return anyio.run(until_signalled, args.handler, args, backend_options=options)
    except (GatewayError, AgentError, ToolkitError) as exc:
        report(exc)
        return exit_code(exc)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BaseExceptionGroup as group:
        # A second Ctrl-C can land inside a task of a task group, which wraps it: still an
        # interruption, not a traceback.
        if group.subgroup(KeyboardInterrupt) is not None:
            return INTERRUPTED
        raise
    except BrokenPipeError:  # `... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 128 + signal.SIGPIPE


def _version() -> str:
    try:
        return version("agent-gateway")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


def parse(argv: list[str]) -> argparse.Namespace | None:
    """`argv` parsed; None when it is empty (the help is printed: what to type first). An
    option the command does not take is refused by the command's own parser, with its usage
    (not the top level's)."""
    # The command is the first word that is no option: the top level's take no value.
    top = parser(only=next((arg for arg in argv if not arg.startswith("-")), ""))
    if not argv:
        top.print_help(sys.stderr)
        return None
    args, extras = top.parse_known_args(argv)
    if extras:
        command: argparse.ArgumentParser = getattr(args, "command_parser", top)
        command.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def parser(only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line, every command's module imported; with `only`, that command's
    parser (and its module's other commands') in full, and the other commands named alone."""
    top = argparse.ArgumentParser(
        prog="agent-gateway", description="Agents on MCP tools, served over MCP."
    )
    top.add_argument(
        "-v", "--verbose", action="count", default=0, help="log at INFO level (-vv: DEBUG)"
    )
    top.set_defaults(log_times=False)  # `serve` sets it
    top.add_argument("--version", action="version", version=f"agent-gateway {_version()}")
    commands = Commands(top)
    chosen = COMMANDS[only].module if only in COMMANDS else None
    registered: set[str] = set()
    for name, command in COMMANDS.items():
        if only is not None and command.module != chosen:
            commands.listed(name)
        elif command.module not in registered:  # it adds all of its commands at once
            registered.add(command.module)
            module: Any = importlib.import_module(f".{command.module}", __name__)
            module.register(commands)
    return top
