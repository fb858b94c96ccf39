"""The `agent-gateway` command line: a thin layer over the library.

Each command lives in its own module with a `register(commands)` function that adds its
subparser and handler; a new command is one module and one entry in `COMMANDS`.
"""

from __future__ import annotations

import argparse
import gc
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

import anyio

from agent import AgentError
from toolkits import ToolkitError
from toolkits.function import running_threads

from ..errors import GatewayError
from ..otel_export import export_at_exit
from . import auth, chat, demo, install, run, runs, serve, sessions, tools
from .common import Commands, check_state_dir
from .exits import BAD_INPUT, FAILED, INTERRUPTED, exit_code, report
from .log_lines import setup_logging
from .output import stdout_for_results
from .signals import until_signalled
from .startup import own_process_ready

__all__ = ["COMMANDS", "main", "parse", "parser"]

COMMANDS = (run, runs, chat, sessions, demo, tools, serve, install, auth)
"""Modules with a `register(commands: Commands)` function, in `--help` order."""


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
    code = _main(argv, own_process=own_process)
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
    given_up = running_threads()
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
    setup_logging(args.verbose, serving=args.log_times)
    with export_at_exit():  # spans are exported after the answer (or the error) is printed
        return _handle(args)


def _handle(args: argparse.Namespace) -> int:
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
    top = parser()
    if not argv:
        top.print_help(sys.stderr)
        return None
    args, extras = top.parse_known_args(argv)
    if extras:
        command: argparse.ArgumentParser = getattr(args, "command_parser", top)
        command.error(f"unrecognized arguments: {' '.join(extras)}")
    return args


def parser() -> argparse.ArgumentParser:
    """The whole command line, every registered command included."""
    top = argparse.ArgumentParser(
        prog="agent-gateway", description="Agents on MCP tools, served over MCP."
    )
    top.add_argument(
        "-v", "--verbose", action="count", default=0, help="log at INFO level (-vv: DEBUG)"
    )
    top.set_defaults(log_times=False)  # `serve` sets it
    top.add_argument("--version", action="version", version=f"agent-gateway {_version()}")
    commands = Commands(top)
    for module in COMMANDS:
        module.register(commands)
    return top
