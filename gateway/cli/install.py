"""`install CLIENT`: add the gateway to an MCP client's config."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, cast, get_args

from ..client_config import required_variables
from ..config import DEFAULT_CONFIG_FILE, load_config, read_config_data, with_default_agent
from ..errors import GatewayError
from ..install import (
    CLIENTS,
    ClientKind,
    Installation,
    client_config_path,
    install_server,
    missing_env,
    parse_env_assignment,
    read_env_file,
    reference_name,
    secret_names,
)
from .common import Commands, how_to_set_model
from .output import result_json, result_stdout

__all__ = ["register"]


def register(commands: Commands) -> None:
    install = commands.add(
        "install",
        _install,
        # Not ./.mcp.json: that is an MCP client's own file, which would run the gateway on itself.
        config_help="the gateway's TOML or JSON config, which the client runs it on "
        f"(default: ./{DEFAULT_CONFIG_FILE})",
    )
    install.add_argument("client", choices=get_args(ClientKind), help="the client to configure")
    install.add_argument("--name", default="agent-gateway", help="the server's name in the client")
    install.add_argument(
        "--client-config",
        metavar="PATH",
        help="the client's config file (default: its usual place)",
    )
    install.add_argument(
        "--project",
        action="store_true",
        help="cursor: the project's .cursor/mcp.json, not ~/.cursor/mcp.json",
    )
    install.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an environment variable for the gateway (repeatable; KEY alone: this shell's value)",
    )
    install.add_argument(
        "--env-file", metavar="FILE", help="environment variables for the gateway, KEY=VALUE lines"
    )
    install.add_argument("--dry-run", action="store_true", help="print the result, write nothing")


def _install(args: argparse.Namespace) -> int:
    client: ClientKind = args.client
    path = Path(args.config or DEFAULT_CONFIG_FILE)
    if not path.is_file():
        raise GatewayError(
            f"no config file {path}: pass --config FILE (the client will run the gateway on it)"
        )
    env = read_env_file(Path(args.env_file)) if args.env_file else {}
    env.update(_env_option(text) for text in args.env)
    data: Any = read_config_data(path)
    servers: Any = cast(dict[str, Any], data).get("mcpServers") if isinstance(data, dict) else None
    variables = required_variables(
        cast(dict[str, Any], servers) if isinstance(servers, dict) else {}
    )
    # Validated here, as the gateway will read it: the client runs it by path, with `env`.
    # A variable of the servers' that is not set yet is a warning below (naming the fix), not
    # an error: the client may well have it.
    environ = {**os.environ, **env}
    environ.update({name: f"${{{name}}}" for name in variables if name not in environ})
    given = load_config(path, environ=environ)
    servers_only = not given.agents
    config = with_default_agent(given)
    target = _client_file(args, client)
    if path.resolve() == target.resolve():
        raise GatewayError(
            f"{path} is {CLIENTS[client].label}'s own file, which the entry goes into: the "
            "gateway run on it would start itself, over and over; copy the servers to put "
            "behind the gateway into a file of their own (or write one with `agent-gateway "
            "init`) and install that"
        )
    new_file = not target.exists()
    done = install_server(
        path,
        client,
        name=args.name,
        client_config=target,
        env=env,
        project=args.project,
        dry_run=args.dry_run,
        secrets=secret_names(config),
    )
    label = CLIENTS[client].label
    _explain_references(done, env, label, args.name)
    if done.machine_paths:
        print(
            f"note: {done.path.name} is meant to be shared, but holds this machine's "
            f"{' and '.join(done.machine_paths)}: on another machine, run `agent-gateway "
            "install` there",
            file=sys.stderr,
        )
    entry_env = _entry_env(done.text, args.name)
    for problem in missing_env(config, entry_env, client, variables):
        print(f"warning: {problem}", file=sys.stderr)
    for agent, spec in config.agents.items():
        if spec.model is None:
            how = how_to_set_model(config, agent, servers_only=servers_only, by_flag=False)
            print(
                f"warning: agent {agent!r} has no model, so every call {label} makes to it "
                f"fails: {how}",
                file=sys.stderr,
            )
    if args.dry_run:
        print(_masked(done.text, args.name), end="", file=result_stdout())
    elif not done.changed:
        print(f"{done.path}: {args.name!r} is already installed", file=result_stdout())
    else:
        backup = f" (backup: {done.backup})" if done.backup else ""
        with_env = f" with env {', '.join(done.env)}" if done.env else ""
        made = " (a new file)" if new_file else ""
        # Another gateway (or server) of that name is gone: a second one needs --name.
        was = f", replacing the one that ran {shlex.join(done.replaced)}" if done.replaced else ""
        print(
            f"{done.path}{made}: installed {args.name!r}{with_env}{was}{backup}; "
            f"restart {label} to use it",
            file=result_stdout(),
        )
    return 0


def _client_file(args: argparse.Namespace, client: ClientKind) -> Path:
    """The client's config file to install into: `--client-config`, else the client's own.
    A folder that does not exist is made only for the client's own file: a mistyped
    `--client-config` would put a file where no client reads it."""
    own = client_config_path(client, project=args.project)
    if not args.client_config:
        return own
    path = Path(args.client_config)
    if not path.parent.is_dir() and path.absolute() != own.absolute():
        raise GatewayError(
            f"--client-config {path}: there is no folder {path.parent} "
            f"({CLIENTS[client].label}'s own file is {own})"
        )
    return path


def _explain_references(done: Installation, given: dict[str, str], label: str, server: str) -> None:
    """What a project's file holds instead of the secrets given, and where they must be."""
    if not done.references:
        return
    written = _entry_env(done.text, server)
    shown = ", ".join(f"{name} as {written[name]}" for name in done.references)
    print(
        f"note: {done.path.name} is the project's file, meant to be shared: secrets go in as "
        f"references ({shown}), which {label} fills in from its environment when it starts "
        "the gateway",
        file=sys.stderr,
    )
    for name in done.references:
        if name in given and reference_name(given[name]) is None:
            if os.environ.get(name) != given[name]:
                state = "different" if os.environ.get(name) else "not set"
                print(
                    f"warning: {name} is {state} in this shell; the value given with --env is "
                    f"not written into {done.path.name}: set {name} where {label} runs",
                    file=sys.stderr,
                )
        elif not os.environ.get(name):
            print(
                f"warning: {name} is not set in this shell: set it where {label} runs",
                file=sys.stderr,
            )
    if done.backup is not None and done.backup_secrets:
        print(
            f"warning: {done.backup} holds the old value of {', '.join(done.backup_secrets)} "
            "(readable by you only): delete it once you have checked the new file, and keep "
            "it out of version control",
            file=sys.stderr,
        )


def _env_option(text: str) -> tuple[str, str]:
    if "=" in text:
        return parse_env_assignment(text)
    value = os.environ.get(text)
    if value is None:
        raise GatewayError(f"--env {text}: not set in this shell; give it as {text}=VALUE")
    return text, value


def _entry_env(text: str, name: str) -> dict[str, str]:
    data: Any = json.loads(text)
    env: Any = data["mcpServers"][name].get("env", {})
    return cast(dict[str, str], env)


def _masked(text: str, name: str) -> str:
    """The config to print: the values of our entry's env are secrets."""
    data: Any = json.loads(text)
    entry: dict[str, Any] = data["mcpServers"][name]
    if "env" in entry:
        entry["env"] = {
            key: value if reference_name(value) else "***"  # a reference is no secret
            for key, value in cast(dict[str, str], entry["env"]).items()
        }
    return result_json(data, indent=2) + "\n"
