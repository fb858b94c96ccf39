"""`serve`: the agents (and exposed tools) as an MCP server, over stdio or HTTP."""

from __future__ import annotations

import argparse
import sys

from ..app import open_gateway
from ..errors import GatewayError
from .common import Commands, add_trace_options, config_of, trace_hooks

__all__ = ["register"]


def register(commands: Commands) -> None:
    serve = commands.add("serve", _serve, "serve the agents (and exposed tools) over MCP")
    transport = serve.add_mutually_exclusive_group(required=True)
    transport.add_argument(
        "--stdio", action="store_true", help="on stdin/stdout (for Claude Desktop)"
    )
    transport.add_argument("--http", metavar="HOST:PORT", help="streamable HTTP at /mcp")
    serve.add_argument(
        "--stateless",
        action="store_true",
        help="keep no HTTP sessions (replicas behind a load balancer)",
    )
    serve.add_argument(
        "--token-env",
        metavar="VAR",
        help="env variable with the bearer tokens (overrides tokens_env)",
    )
    add_trace_options(serve)


async def _serve(args: argparse.Namespace) -> int:
    # Imported here: the other commands need neither the server nor uvicorn.
    from ..server import build_server, http_options, serve_http, serve_stdio

    config = config_of(args)
    if args.stateless and not args.http:
        raise GatewayError("--stateless applies to --http only")
    # Every check runs before anything binds or launches.
    options = (
        http_options(args.http, config.gateway, token_env=args.token_env, stateless=args.stateless)
        if args.http
        else None
    )
    async with open_gateway(config, hooks=trace_hooks(args)) as gateway:
        server, router = build_server(gateway, config.gateway)
        await router.check()
        if options is None:
            await serve_stdio(server)
        else:

            def ready(url: str) -> None:
                print(f"agent-gateway: serving MCP on {url}", file=sys.stderr, flush=True)

            await serve_http(server, options, on_ready=ready)
    return 0
