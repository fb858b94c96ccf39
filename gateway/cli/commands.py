"""The commands of `agent-gateway`: which module each lives in and its one line of help, and how
a module adds its parser and handler (`Commands`).

The table is what `--help` lists, so the command line is built with only the chosen command's
module imported: each imports the library (~0.6 s of CPU), which `--version`, `--help` and
a mistyped command need none of. Standard library only.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Awaitable, Callable
from typing import NamedTuple

__all__ = ["COMMANDS", "Command", "Commands", "Handler", "add_verbose_option", "user_path"]


class Command(NamedTuple):
    module: str
    """The module of `gateway.cli` whose `register(commands)` adds it."""
    help: str


COMMANDS: dict[str, Command] = {
    "run": Command("run", "ask an agent a question and print its answer"),
    "resume": Command(
        "run", "continue a stored run that stopped, on the config and model it started with"
    ),
    "runs": Command("runs", "stored runs: list, show, resume, cancel, approve, deny, prune"),
    "chat": Command("chat", "talk with an agent; the conversation is kept (/tools, /reset, /exit)"),
    "sessions": Command("sessions", "list, show, delete or prune chat memory sessions"),
    "demo": Command("demo", "run the example agent with its trace; needs no API key"),
    "tools": Command("tools", "list the tools the config provides"),
    "call": Command("tools", "call one tool (or agent) through the gateway and print its result"),
    "serve": Command("serve", "serve the agents (and exposed tools) over MCP"),
    "init": Command("init", "write the built-in default config to a file, to start from"),
    "install": Command("install", "add the gateway to an MCP client's config"),
    "auth": Command("auth", "authorise the gateway at MCP servers that use OAuth"),
}
"""Every command, in `--help` order (a module's commands together, in the order it adds them)."""

Handler = Callable[[argparse.Namespace], int] | Callable[[argparse.Namespace], Awaitable[int]]
"""A command: its parsed arguments in, the exit code out (sync or async)."""


class Commands:
    """The subcommands of `agent-gateway`; `add` gives one its parser and handler."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self._subparsers = parser.add_subparsers(required=True, metavar="COMMAND")

    def add(
        self,
        name: str,
        handler: Handler,
        *,
        config: bool = True,
        config_help: str = "TOML or JSON config (default: ./agent-gateway.toml, else ./.mcp.json)",
        stdout_is_result: bool = True,
    ) -> argparse.ArgumentParser:
        """The command `name` of `COMMANDS`, running `handler`; with `config`, it takes
        `--config FILE`. With `stdout_is_result`, stdout carries only what it writes to
        `result_stdout()` (see `output`); else it keeps stdout as it finds it (`serve --stdio`
        guards its own)."""
        help = COMMANDS[name].help
        sub = self._subparsers.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler, command_parser=sub, stdout_is_result=stdout_is_result)
        add_verbose_option(sub)
        if config:
            sub.add_argument(
                "--config",
                metavar="FILE",
                type=user_path,
                help=config_help,
            )
        return sub

    def listed(self, name: str) -> None:
        """The command `name` named in `--help` alone: it is not the one to run."""
        self._subparsers.add_parser(name, help=COMMANDS[name].help)


def user_path(value: str) -> str:
    """A path option's value with a leading `~` (`~/st`, `~user/st`) expanded: the shell does
    not, in quotes or after `=` (`--state-dir=~/st`), and `./~/st` would be made."""
    return os.path.expanduser(value)


def add_verbose_option(sub: argparse.ArgumentParser) -> None:
    """`-v` after a command's name (or its action's, as `runs list -v`); the value given
    before it stands when not given here."""
    sub.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=argparse.SUPPRESS,
        help="log at INFO (-vv: DEBUG)",
    )
