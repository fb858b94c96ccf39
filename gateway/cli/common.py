"""What the commands share: their common options, agents and servers (how a command is added
is `commands`, kept apart: the command line is parsed before any of this is imported)."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from pydantic import JsonValue, ValidationError

from agent.memory.base import session_key_error
from agent.model_json import NotModelJson, read_model_json

from ..config import AgentConfig, Config, load_config, with_default_agent
from ..console import RunConsole
from ..engine import Gateway
from ..errors import ConfigError, GatewayError, UnknownAgent
from ..memory_config import memory_url
from ..model_specs import ClientSampling, cannot_run
from ..trace import JsonLinesPrinter, TraceHook, TracePrinter
from .commands import Commands, Handler, add_verbose_option, user_path
from .exits import RunFailed

__all__ = [
    "Commands",
    "Handler",
    "add_context_option",
    "add_model_options",
    "add_strict_option",
    "add_trace_options",
    "add_verbose_option",
    "check_memory_kept",
    "check_runnable",
    "check_servers",
    "check_session_id",
    "check_state_dir",
    "config_of",
    "count_of",
    "did_you_mean",
    "how_to_set_model",
    "name_width",
    "pick_agent",
    "plural",
    "read_context",
    "trace_hooks",
    "user_path",
    "utc",
    "vacuumed_line",
    "with_command_line",
    "with_settings",
    "with_steps",
]


def check_state_dir(args: argparse.Namespace) -> None:
    """`--state-dir` (any command's) names a directory, or where one can be made; else
    `GatewayError` (bad input): opening the store in it said `File exists`."""
    value: str | None = getattr(args, "state_dir", None)
    if value is not None and Path(value).exists() and not Path(value).is_dir():
        raise GatewayError(f"--state-dir {value}: not a directory")


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`; did you mean 'X'?` for the known names closest to a mistyped `name` ("" if none)."""
    close = difflib.get_close_matches(name, list(known), n=3)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def utc(ms: float) -> str:
    """`2026-12-01 04:45:06 UTC`: a time (milliseconds since the epoch) as the commands show it."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


NAME_WIDTH_CAP = 48
"""The widest a listing's name column grows: a longer name pushes its own line's rest."""


def name_width(names: Iterable[str]) -> int:
    """The width of a listing's name column: its longest name's, up to `NAME_WIDTH_CAP`."""
    return min(max((len(name) for name in names), default=0), NAME_WIDTH_CAP)


def plural(count: int, noun: str) -> str:
    """`1 turn`, `2 turns`: a count and its noun (a regular plural)."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def count_of(nouns: str) -> Callable[[str], int]:
    """An argparse `type`: a number of `nouns` (0 or more), as `--limit` takes."""

    def count(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            number = -1
        if number < 0:
            raise argparse.ArgumentTypeError(f"not a number of {nouns} (0 or more): {text!r}")
        return number

    return count


def vacuumed_line(
    file: object, sizes: tuple[int, int] | None, failed: object, reused_by: str
) -> str:
    """What VACUUM did with a SQLite file's free room, in a line: its size before and after,
    or why it was not made smaller (`failed`: a full disk has no room for its copy), the
    deleted rows' room then reused by new `reused_by`."""
    if sizes is None:
        return f"{file}: not made smaller ({failed}); new {reused_by} reuse its free room"
    return f"{file}: {sizes[0] / 1e6:.1f} MB before, {sizes[1] / 1e6:.1f} MB now"


def check_session_id(session_id: str) -> str:
    """`session_id` as given on the command line; `GatewayError` (bad input, exit 2) when it
    cannot name a session, before anything runs."""
    problem = session_key_error(session_id)
    if problem is not None:
        raise GatewayError(f"bad session id {session_id[:40]!r}: {problem}")
    return session_id


def add_context_option(parser: argparse.ArgumentParser, more: str = "") -> None:
    """`--context JSON`: the run's context (`read_context` reads it); `more` adds to its help."""
    parser.add_argument(
        "--context",
        metavar="JSON",
        help="the run's context, a JSON object (the system message's {{ context.KEY }}, "
        f"local tools' CallInfo){more}",
    )


def read_context(text: str, what: str = "--context") -> dict[str, JsonValue]:
    """`text` as a run's context, a JSON object; `GatewayError` (bad input) naming `what`
    (the option or command it was given with) when it is not one."""
    try:
        # As `call --args` and the config: NaN and Infinity are no JSON (a stored run would
        # keep them as null), nor is nesting past 100 levels.
        value: object = read_model_json(text)
    except NotModelJson as exc:
        raise GatewayError(f"{what} is {exc}") from None
    except json.JSONDecodeError as exc:
        raise GatewayError(f"{what} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise GatewayError(f'{what} must be a JSON object ({{"key": ...}}), not {text!r}')
    return cast(dict[str, JsonValue], value)


def config_of(
    args: argparse.Namespace, *, default_agent: bool = True, runs_it: bool = True
) -> Config:
    """The config the command names (`--config`), or the one found in the working directory;
    with `default_agent`, a config of servers only gets an `assistant` agent on all of them.
    With `runs_it` (the command starts the config's servers), a found config that starts
    programs is said on stderr first: a folder's file runs code the user never named."""
    path: Any = getattr(args, "config", None)
    config = with_command_line(load_config(path), args)
    notice = found_config_notice(config) if path is None and runs_it else None
    if notice is not None:
        print(notice, file=sys.stderr, flush=True)
    config = with_default_agent(config) if default_agent else config
    return with_settings(
        config,
        agent=getattr(args, "agent", None),
        system=getattr(args, "system", None),
        temperature=getattr(args, "temperature", None),
        max_tokens=getattr(args, "max_tokens", None),
    )


def found_config_notice(config: Config) -> str | None:
    """The line saying what a config found in the working directory runs (its stdio servers
    start, its python tools are imported); None when it runs nothing, or was not found."""
    if config.source is None:
        return None
    servers = [name for name, server in config.mcp_servers.items() if server.command]
    python = [name for name, tool in config.tools.items() if tool.python]
    runs = [
        *([f"starting its servers {', '.join(servers)}"] if servers else []),
        *([f"importing its python tools {', '.join(python)}"] if python else []),
    ]
    if not runs:
        return None
    return (
        f"note: using {config.source}, found in this folder: {' and '.join(runs)} "
        "(--config FILE names another)"
    )


def with_command_line(config: Config, args: argparse.Namespace) -> Config:
    """`config` with what the command line turns on for the whole gateway (`--otel`): the one
    place a loaded config takes it, for every command that runs an agent (`run`, `resume`,
    `runs resume`, `chat`, `call`, `serve`)."""
    if getattr(args, "otel", False) and not config.gateway.otel:
        gateway = config.gateway.model_copy(update={"otel": True})
        config = config.model_copy(update={"gateway": gateway})
    return config


def add_model_options(
    sub: argparse.ArgumentParser, *, agent: bool = True, settings: bool = True
) -> None:
    sub.add_argument(
        "--model", metavar="SPEC", help="model spec for every agent, e.g. scripted:FILE"
    )
    if agent:
        sub.add_argument("--agent", help="which agent (default: the only one)")
    if settings:
        sub.add_argument("--system", help="the agent's system message, instead of its own")
        sub.add_argument(
            "--temperature", type=float, help="sampling temperature for every agent's model"
        )
        sub.add_argument(
            "--max-tokens", type=int, help="the most tokens of one answer, for every agent"
        )


def with_settings(
    config: Config,
    *,
    agent: str | None = None,
    system: str | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
) -> Config:
    """`--system` for the chosen agent (`agent`, or the only one), `--temperature` and
    `--max-tokens` for every agent; checked as the config's own keys are."""
    given = {"temperature": temperature, "max_tokens": max_tokens}
    update = {key: value for key, value in given.items() if value is not None}
    if system is None and not update:
        return config
    chosen = pick_agent(config, agent) if system is not None else None
    agents: dict[str, AgentConfig] = {}
    for name, spec in config.agents.items():
        changes = {**update, "system": system} if name == chosen else update
        try:
            agents[name] = AgentConfig.model_validate({**spec.model_dump(), **changes})
        except ValidationError as exc:
            problems = "; ".join(
                f"--{str(e['loc'][-1]).replace('_', '-')}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(problems) from exc
    return config.model_copy(update={"agents": agents})


def add_trace_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--trace", action="store_true", help="print the trace to stderr")
    sub.add_argument("--trace-json", action="store_true", help="trace as JSON lines")
    sub.add_argument(
        "--otel",
        action="store_true",
        help="export the trace as OpenTelemetry spans (as `[gateway] otel = true`)",
    )


def add_strict_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--strict", action="store_true", help="fail (exit 1) when a configured server is down"
    )


def trace_hooks(args: argparse.Namespace, console: RunConsole | None = None) -> list[TraceHook]:
    """The trace printers asked for; with a `console`, also it, and they write around its
    status line."""
    stderr = console.stream(sys.stderr) if console is not None else sys.stderr
    hooks: list[TraceHook] = [console] if console is not None else []
    if getattr(args, "trace", False):
        hooks.append(TracePrinter(stderr))
    if getattr(args, "trace_json", False):
        hooks.append(JsonLinesPrinter(stderr))
    return hooks


def pick_agent(config: Config, requested: str | None) -> str:
    """The agent named by `--agent`, or the only one. Raises `UnknownAgent` (listing them)."""
    if not config.agents:
        where = str(config.source) if config.source is not None else "the config"
        raise UnknownAgent(
            f"{where} defines no agents, nor any MCP server or tool for a default one: "
            "add [agents.NAME] (or [mcpServers.NAME])"
        )
    names = ", ".join(sorted(config.agents))
    if requested is not None:
        if requested not in config.agents:
            raise UnknownAgent(
                f"no agent named {requested!r}{did_you_mean(requested, config.agents)} "
                f"(configured: {names})"
            )
        return requested
    if len(config.agents) == 1:
        return next(iter(config.agents))
    raise UnknownAgent(f"choose an agent with --agent (configured: {names})")


def check_memory_kept(config: Config, agent: str, state_dir: str | None = None) -> None:
    """Before a run that uses a session: where `agent`'s sessions are kept is known, else
    `ConfigError` (bad input) saying what to set (no home directory, none named). A run
    without a session needs no such place."""
    own = config.agents[agent].memory
    memory_url(config.gateway.memory, own, state_dir=state_dir, run_store=config.store.url)


def check_runnable(gateway: Gateway, name: str) -> None:
    """Refuse, as bad input, an agent that cannot run from the command line."""
    model = gateway.agents[name].model
    if isinstance(model, ClientSampling):
        raise GatewayError(
            f"agent {name!r}: model 'sampling' needs an MCP client: use `agent-gateway serve` "
            "(or pass --model SPEC)"
        )
    reason = cannot_run(model)
    if reason is not None:  # none configured, or its provider's key is not set
        raise ConfigError(reason)


def check_servers(gateway: Gateway, *, strict: bool) -> None:
    """With `strict`, fail (exit 1) when any configured MCP server is not ready."""
    down = list(gateway.unhealthy(list(gateway.nodes)).values())
    if strict and down:
        lines = "\n".join(f"  {health}" for health in down)
        raise RunFailed(f"--strict: {len(down)} server(s) down:\n{lines}")


def with_steps(gateway: Gateway, name: str) -> None:
    """Have `name`'s runs return their intermediate steps (for `--json`)."""
    spec = gateway.agents[name]
    options = dataclasses.replace(spec.options, return_intermediate_steps=True)
    gateway.agents[name] = dataclasses.replace(spec, options=options)


def how_to_set_model(
    config: Config, agent: str, *, servers_only: bool, by_flag: bool = True
) -> str:
    """How to give `agent` a model (`by_flag`: or `--model SPEC`), or (`servers_only`) serve
    the servers' tools instead, in the form of the config's file: TOML tables, or JSON keys
    (an MCP client's file)."""
    if config.in_json:
        model = f'"agents": {{"{agent}": {{"model": "SPEC"}}}}'
        expose = '"gateway": {"expose_tools": true}'
        how = f"set its model in the file ({model})"
    else:
        expose = "[gateway] expose_tools = true"
        how = f"set `model` in [agents.{agent}]"
    how += " or pass --model SPEC" if by_flag else ""
    proxy = f"; or, to serve the servers' own tools (a proxy), set {expose}"
    return how + (proxy if servers_only else "")
