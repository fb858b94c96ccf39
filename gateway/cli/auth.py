"""`agent-gateway auth login|status|logout`: the user's OAuth authorizations at MCP servers."""

from __future__ import annotations

import argparse
import sys

from mcp.client.auth import OAuthFlowError

from toolkits import ToolkitError
from toolkits.errors import find_error
from toolkits.mcp import McpServerConfig
from toolkits.mcp.authorization import login, logout, status_of_all
from toolkits.mcp.error_text import describe_error
from toolkits.mcp.oauth import redirect_mode_from_env
from toolkits.mcp.oauth_store import default_store
from toolkits.mcp.sent_credentials import SentCredentials

from ..config import Config
from ..errors import GatewayError
from .common import Commands, Handler, add_verbose_option, config_of, plural
from .output import result_stdout

__all__ = ["register"]


def register(commands: Commands) -> None:
    auth = commands.add("auth", _usage, config=False)
    actions = auth.add_subparsers(metavar="ACTION")

    def action(name: str, handler: Handler, help: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, help=help, description=help)
        sub.set_defaults(handler=handler, command_parser=sub)
        add_verbose_option(sub)
        sub.add_argument(
            "--config", metavar="FILE", help="TOML or JSON config (default: ./agent-gateway.toml)"
        )
        return sub

    login_ = action("login", _login, "open the server's authorisation page; keep the tokens")
    login_.add_argument("server", help="the server's name in the config")
    action("status", _status, "per server: authorised or not, until when, which scopes")
    logout_ = action(
        "logout", _logout, "revoke the server's tokens, forget them and the client registration"
    )
    logout_.add_argument("server", help="the server's name in the config")


def _usage(args: argparse.Namespace) -> int:
    del args
    raise GatewayError("say what to do: agent-gateway auth login NAME | status | logout NAME")


def _server(config: Config, name: str) -> McpServerConfig:
    server = config.mcp_servers.get(name)
    if server is None:
        known = ", ".join(sorted(config.mcp_servers)) or "none"
        raise GatewayError(f"no MCP server named {name!r} in the config (servers: {known})")
    return server


async def _login(args: argparse.Namespace) -> int:
    server = _server(config_of(args, default_agent=False, runs_it=False), args.server)
    mode = redirect_mode_from_env("browser")

    def announce(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    # The server's URL (its path's key) and what it answered: an error may say them.
    sent = SentCredentials.of(server)
    try:
        done, tools = await login(args.server, server, mode=mode, announce=announce)
    except (OAuthFlowError, OSError, TimeoutError) as exc:
        print(
            f"error: could not authorise at {args.server!r}: {sent.mask(str(exc))}", file=sys.stderr
        )
        return 1
    except Exception as exc:
        if isinstance(exc, GatewayError | ToolkitError):
            raise  # bad input: exit 2
        flow = find_error(exc, OAuthFlowError)  # its message says it all, wrapped or not
        said = sent.mask(str(flow) if flow else describe_error(exc))
        print(f"error: could not authorise at {args.server!r}: {said}", file=sys.stderr)
        return 1
    print(f"{done}; {plural(tools, 'tool')}", file=result_stdout())
    return 0


async def _status(args: argparse.Namespace) -> int:
    config = config_of(args, default_agent=False, runs_it=False)
    store = default_store()
    print(f"tokens in: {store.description}", file=result_stdout())
    found = await status_of_all(config.mcp_servers, store=store)
    for line in found:
        print(line, file=result_stdout())
    if not found:
        print("no configured MCP server uses OAuth", file=result_stdout())
    return 0


async def _logout(args: argparse.Namespace) -> int:
    config = config_of(args, default_agent=False, runs_it=False)
    outcome = await logout(args.server, _server(config, args.server))
    print(outcome, file=result_stdout())
    if outcome.failure is not None:
        print(
            f"error: could not revoke the tokens of {args.server!r} at its authorization server: "
            f"{outcome.failure}; they stay valid there until they expire",
            file=sys.stderr,
        )
        return 1
    return 0
