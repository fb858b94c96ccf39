"""`install CLIENT`: add the gateway to an MCP client's config."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import DEFAULT_CONFIG_FILE
from ..errors import GatewayError
from ..install import install_claude_desktop
from .common import Commands, config_of

__all__ = ["register"]


def register(commands: Commands) -> None:
    install = commands.add("install", _install, "add the gateway to an MCP client's config")
    install.add_argument("client", choices=["claude-desktop"], help="the client to configure")
    install.add_argument("--name", default="agent-gateway", help="the server's name in the client")
    install.add_argument(
        "--client-config",
        metavar="PATH",
        help="the client's config file (default: its usual place)",
    )
    install.add_argument("--dry-run", action="store_true", help="print the result, write nothing")


def _install(args: argparse.Namespace) -> int:
    config_of(args)  # validated here: the client will run the gateway on it, by path
    path = Path(args.config or DEFAULT_CONFIG_FILE)
    if not path.is_file():
        raise GatewayError(
            f"no config file {path}: pass --config FILE (the client will run the gateway on it)"
        )
    client_config = Path(args.client_config) if args.client_config else None
    done = install_claude_desktop(
        path, name=args.name, client_config=client_config, dry_run=args.dry_run
    )
    if args.dry_run:
        print(done.text, end="")
    elif not done.changed:
        print(f"{done.path}: {args.name!r} is already installed")
    else:
        backup = f" (backup: {done.backup})" if done.backup else ""
        print(f"{done.path}: installed {args.name!r}{backup}; restart Claude Desktop to use it")
    return 0
