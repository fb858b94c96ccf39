"""`serve`: the agents (and exposed tools) as an MCP server, over stdio or HTTP."""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager, nullcontext
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

from toolkits import HasHealth

from ..assembly import open_gateway
from ..config import Config, with_default_agent
from ..engine import Gateway
from ..errors import GatewayError, UnknownAgent
from ..model_specs import NoModel, cannot_run
from ..store_config import check_store_url, default_store_url
from ..tool_limits import too_many_tools, tools_offered
from .common import (
    Commands,
    add_strict_option,
    add_trace_options,
    check_servers,
    config_of,
    how_to_set_model,
    trace_hooks,
    user_path,
)
from .give_back_memory import give_back_memory, trimmer
from .log_lines import timed
from .origin import origin_of
from .signals import SIGNALS, on_signal
from .stored import open_store, preload_store

if TYPE_CHECKING:
    from ..server import HttpOptions

__all__ = ["REPLICA_URL_ENV", "register"]

REPLICA_URL_ENV = "AGENT_GATEWAY_REPLICA_URL"
_WILDCARDS = ("0.0.0.0", "::")


def register(commands: Commands) -> None:
    serve = commands.add("serve", _serve, stdout_is_result=False)
    # Ctrl-C stops a server as SIGTERM does: calls in flight get their grace, a second ends it.
    # A server's lines are read later, from a file: each says when (`log_lines`).
    serve.set_defaults(signals=(signal.SIGINT, *SIGNALS), log_times=True)
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
    serve.add_argument("--model", help="model spec for every agent, e.g. openai:gpt-4.1-mini")
    serve.add_argument(
        "--agent",
        action="append",
        metavar="NAME",
        help="serve only this agent (repeatable; agents it calls are served too)",
    )
    serve.add_argument(
        "--store",
        metavar="URL",
        help="keep agent runs in this run store (default: [store] url in the config, else "
        "none): they survive a restart, and clients that cannot be asked get run handles",
    )
    serve.add_argument(
        "--state-dir",
        metavar="DIR",
        type=user_path,
        help="the run store in agent-gateway.sqlite3 in DIR",
    )
    serve.add_argument(
        "--replica-url",
        metavar="URL",
        help="where the other replicas reach this one, e.g. http://10.0.0.5:8000/mcp "
        f"(default: ${REPLICA_URL_ENV}, else the bound address unless it is 0.0.0.0 or ::)",
    )
    add_strict_option(serve)
    add_trace_options(serve)


async def _serve(args: argparse.Namespace) -> int:
    # Imported here: the other commands need neither the server nor uvicorn.
    from ..server import build_server, http_options, serve_http, serve_stdio
    from ..server.served.run_handles import RUN_TOOLS
    from ..server.server import reachable_at
    from ..server.transports.draining import ANSWER_SLACK, SHUTDOWN_GRACE, Drains
    from ..server.transports.http import MCP_PATH

    given = config_of(args, default_agent=False)
    config = _served(given, args.agent)
    if args.stateless and not args.http:
        raise GatewayError("--stateless applies to --http only")
    # Every check runs before anything binds or launches.
    options = (
        http_options(args.http, config.gateway, token_env=args.token_env, stateless=args.stateless)
        if args.http
        else None
    )
    if args.http:
        _warn_unused_tokens(args.token_env or config.gateway.tokens_env)
    url = _store_url(args, config)
    origin = origin_of(args) if url is not None else None
    if url is not None:
        preload_store()
        # Chat memory goes to the run store's database too, unless the config names its own.
        config = config.model_copy(update={"store": config.store.model_copy(update={"url": url})})
    async with (
        # Bound before any MCP server starts: a port in use is said now, not after `start_wait`.
        _bound(options) as sock,
        open_gateway(
            config,
            model=args.model,
            hooks=trace_hooks(args),
            start_wait=None if args.strict else config.gateway.start_wait,
            # The run tools are served beside the servers': a server's tool of their name
            # is the one prefixed (its tools are not the operator's to rename, and change).
            served_names=dict.fromkeys(RUN_TOOLS, "run tool") if url is not None else None,
        ) as gateway,
        # Served over HTTP, a replica: it finishes the runs of replicas that died.
        open_store(
            url,
            replica_every=config.store.takeover_seconds if options else None,
            keep_days=config.store.keep_days,
            unreachable_wait=config.store.unreachable_wait,
            read_pickled=config.store.read_pickled,
            origin=origin,
        )
        if url is not None
        else nullcontext() as runs,
    ):
        if runs is not None:
            runs.use(gateway)
        server, router = build_server(gateway, config.gateway, runs=runs, origin=origin)
        await router.check()
        check_servers(gateway, strict=args.strict)
        await _warn_about(gateway, config, servers_only=not given.agents)

        def ready(url: str) -> None:
            reached = args.replica_url or os.environ.get(REPLICA_URL_ENV) or url
            if urlsplit(reached).hostname not in _WILDCARDS:
                reachable_at(server, reached)
            print(timed(f"agent-gateway: serving MCP on {url}"), file=sys.stderr, flush=True)
            if gateway.agents:  # a proxy of servers alone has none to serve there
                openai = f"{url.removesuffix(MCP_PATH)}/v1"
                said = f"agent-gateway: serving the agents to OpenAI clients at {openai}"
                print(timed(said), file=sys.stderr, flush=True)

        # Told to go (a rolling restart, a client stopping us), the calls in flight finish
        # first (within the grace), with their MCP servers still there; a replica leaves its
        # runs to the others.
        stop, stopped = anyio.Event(), anyio.Event()

        async def draining() -> None:
            stopping = f"agent-gateway: stopping; calls in flight get {SHUTDOWN_GRACE} s to finish"
            print(timed(stopping), file=sys.stderr, flush=True)
            stop.set()
            # The transport ends the calls left at its grace's end and sends their answers,
            # MCP servers still up (a call passed through ends with the node); this is the
            # backstop.
            with anyio.move_on_after(SHUTDOWN_GRACE + ANSWER_SLACK):
                await stopped.wait()

        with (
            on_signal(runs.hand_over) if runs is not None else nullcontext(),
            on_signal(draining),
        ):
            async with anyio.create_task_group() as tasks:
                if (trim := trimmer()) is not None and isinstance(server, Drains):
                    tasks.start_soon(give_back_memory, server.calls_in_flight, trim)
                try:
                    if options is None:
                        limit = config.gateway.max_request_bytes
                        await serve_stdio(server, max_message_bytes=limit, stop=stop)
                    else:
                        await serve_http(server, options, on_ready=ready, stop=stop, sock=sock)
                finally:
                    stopped.set()
                    tasks.cancel_scope.cancel()
    return 0


@asynccontextmanager
async def _bound(options: HttpOptions | None) -> AsyncGenerator[socket.socket | None]:
    """The socket `serve --http` will serve on, bound (not listening yet); None for stdio."""
    from ..server.transports.listening import bind_socket

    if options is None:
        yield None
        return
    with bind_socket(options.host, options.port) as sock:
        yield sock


def _store_url(args: argparse.Namespace, config: Config) -> str | None:
    """The run store `serve` keeps runs in: only one named (served runs are not stored by
    default: each would cost the store's start-up and a few ms per step)."""
    if args.store and args.state_dir:
        raise GatewayError("give one of --store and --state-dir")
    if args.store:
        return check_store_url(args.store)
    if args.state_dir:
        return default_store_url(args.state_dir)
    return config.store.url


def _served(config: Config, agents: list[str] | None) -> Config:
    """The config to serve: in proxy mode as it is, else with the default agent of a config of
    servers only; with `--agent`, only the agents named and the agents they call, and only the
    MCP servers those use or the config exposes (`expose_tools`: every one). A server nothing
    served uses is not started: waiting `start_wait` for it (or retrying one that cannot
    start) would delay every client for nothing."""
    settings = config.gateway
    if not (settings.expose_tools or settings.expose):
        config = with_default_agent(config)
    if not agents:
        return config
    names = ", ".join(sorted(config.agents)) or "none"
    for name in agents:
        if name not in config.agents:
            raise UnknownAgent(f"no agent named {name!r} (configured: {names})")
    served = config.reached_from(agents)
    if settings.expose_tools:
        return config.model_copy(update={"agents": served})
    used = {node for name in served for node in config.nodes_of(name)} | set(settings.expose)
    servers = {name: server for name, server in config.mcp_servers.items() if name in used}
    return config.model_copy(update={"agents": served, "mcp_servers": servers})


async def _warn_about(gateway: Gateway, config: Config, *, servers_only: bool) -> None:
    """Say on stderr what a client would otherwise find out by calling: nothing served, or
    agents that cannot answer (no model, or more tools than their model takes). With
    `servers_only` (a config of servers and no agents), the one without a model is the
    default agent, where a proxy's user wanted the servers' tools."""
    settings = config.gateway
    exposed = list(gateway.nodes) if settings.expose_tools else list(settings.expose)
    tools = [tool for name in exposed for tool in await gateway.nodes[name].list_tools()]
    if not gateway.agents and not tools:
        if exposed:
            hint = "none of the exposed nodes offers a tool now"
        elif config.in_json:
            hint = 'add "agents" or "mcpServers" to the file, or "gateway": {"expose_tools": true}'
        else:
            hint = "add [agents] or [mcpServers] to the config, or set [gateway] expose_tools"
        starting = [
            name
            for name in exposed
            if isinstance(node := gateway.nodes[name], HasHealth)
            and node.health.state == "connecting"
        ]
        if starting:  # after `start_wait`: their tools come when they are ready
            hint += f"; still starting: {', '.join(starting)}"
        _warn(f"serving nothing: no agents and no tools ({hint})")
    for name, spec in gateway.agents.items():
        if isinstance(spec.model, NoModel):
            how = how_to_set_model(config, name, servers_only=servers_only)
            _warn(f"agent {name!r} has no model, so calls to it fail: {how}")
        elif (reason := cannot_run(spec.model)) is not None:
            _warn(f"agent {name!r} cannot answer, so calls to it fail: {reason}")
        else:
            offered = await tools_offered(gateway, spec)
            if (said := too_many_tools(name, spec.model, offered)) is not None:
                _warn(said)


TOKENS_ENV = "AGENT_GATEWAY_TOKENS"
"""The variable the README's examples keep the bearer tokens in: read only when named."""


def _warn_unused_tokens(named: str | None) -> None:
    """Tokens put in `TOKENS_ENV` but not named (`--token-env`, `tokens_env`) are not read: on
    loopback the gateway then serves without them, which nothing else would tell."""
    if named == TOKENS_ENV or not os.environ.get(TOKENS_ENV):
        return
    used = (
        f"the tokens are read from {named}"
        if named
        else f"serving HTTP without bearer tokens (--token-env {TOKENS_ENV} or [gateway] "
        f'tokens_env = "{TOKENS_ENV}" names it)'
    )
    _warn(f"{TOKENS_ENV} is set but not used: {used}")


def _warn(message: str) -> None:
    print(timed(f"agent-gateway: warning: {message}"), file=sys.stderr, flush=True)
