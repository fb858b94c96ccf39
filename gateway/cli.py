"""The `agent-gateway` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import anyio

from agent import AgentError, AgentItem, ScriptedAnswer, ScriptedCall, ScriptedModel
from toolkits import ToolkitError, result_text
from toolkits.mcp import McpToolkit

from .app import open_gateway
from .config import DEFAULT_CONFIG_FILE, Config, load_config
from .engine import Gateway, RunResult, RunState
from .errors import GatewayError
from .install import install_claude_desktop
from .models import ClientSampling, NoModel
from .store import FileRunStore
from .trace import JsonLinesPrinter, TraceHook, TracePrinter, new_id

__all__ = ["main"]

DEMO_QUESTION = "A shirt costs 25 dollars. How much do 17 shirts cost?"
DEMO_SCRIPT = [
    ScriptedAnswer(
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "17 * 25"})]
    ),
    ScriptedAnswer(content="17 shirts cost 425 dollars."),
]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config)
        if not inspect.iscoroutinefunction(args.command):
            return args.command(args, config)
        return anyio.run(args.command, args, config)
    except (GatewayError, AgentError, ToolkitError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


async def _run(args: argparse.Namespace, config: Config) -> int:
    hooks = _trace_hooks(args)
    store = FileRunStore(args.state_dir) if args.state_dir else None
    async with open_gateway(config, model=args.model, hooks=hooks) as gateway:
        name = _pick_agent(gateway, args.agent)
        _refuse_client_sampling(gateway, name)
        state = RunState(
            run_id=new_id(),
            agent=name,
            items=[AgentItem(prompt=args.question, session_id=args.session)],
        )
        result = await _stored(gateway, state, store)
    return _print_result(result)


async def _resume(args: argparse.Namespace, config: Config) -> int:
    store = FileRunStore(args.state_dir)
    state = await store.load(args.run_id)
    async with open_gateway(config, model=args.model, hooks=_trace_hooks(args)) as gateway:
        result = await _stored(gateway, state, store)
    return _print_result(result)


async def _stored(gateway: Gateway, state: RunState, store: FileRunStore | None) -> RunResult:
    """Run on from `state`; with a store, checkpoint every step and say how to go on after a
    failure (the store keeps the state of the last step that completed)."""
    if store is None:
        return await gateway.resume(state)
    await store.save(state)
    try:
        result = await gateway.resume(state, checkpoint=store.save)
    except (AgentError, ToolkitError, GatewayError) as exc:
        raise GatewayError(
            f"{exc}\nthe run is stored: agent-gateway resume {state.run_id} "
            f"--state-dir {store.directory}"
        ) from exc
    await store.delete(state.run_id)
    return result


async def _demo(args: argparse.Namespace, config: Config) -> int:
    async with open_gateway(config, model=args.model, hooks=[TracePrinter(sys.stdout)]) as gateway:
        name = _pick_agent(gateway, args.agent)
        _refuse_client_sampling(gateway, name)
        spec = gateway.agents[name]
        if isinstance(spec.model, NoModel):
            print(
                "No model configured: using the SCRIPTED demo model. It replays a fixed script;\n"
                "the calculator call below is real. Pass --model SPEC to use a real model.\n"
            )
            demo_model = ScriptedModel(DEMO_SCRIPT, name="scripted-demo")
            gateway.agents[name] = dataclasses.replace(spec, model=demo_model)
        print(f"question: {args.question}")
        result = await gateway.run(name, args.question)
    print()
    return _print_result(result, label=True)


async def _tools(args: argparse.Namespace, config: Config) -> int:
    async with open_gateway(config) as gateway:
        tools = await gateway.list_tools()
        for tool in sorted(tools.values(), key=lambda t: (t.source_node, t.name)):
            summary = (tool.description.strip().splitlines() or [""])[0]
            origin = f" ({tool.original_name})" if tool.original_name else ""
            print(f"{tool.name:<32} node={tool.source_node}{origin}  {summary}")
        for name, agent in gateway.agents.items():
            print(f"agent {name}: model={agent.model.name} tools={list(agent.tools)}")
        servers = [node for node in gateway.nodes.values() if isinstance(node, McpToolkit)]
        for server in servers:
            print(f"server {server.health}")
    return 1 if any(server.health.state != "ready" for server in servers) else 0


async def _call(args: argparse.Namespace, config: Config) -> int:
    try:
        arguments: Any = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise GatewayError(f"--args is not valid JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise GatewayError("--args must be a JSON object")
    arguments = cast(dict[str, Any], arguments)
    async with open_gateway(config, hooks=_trace_hooks(args)) as gateway:
        result = await gateway.call_tool(args.tool, arguments)
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True))
    else:
        print(result_text(result))
    return 1 if result.is_error else 0


async def _serve(args: argparse.Namespace, config: Config) -> int:
    # Imported here: the other commands need neither the server nor uvicorn.
    from .server import build_server, http_options, serve_http, serve_stdio

    if args.stateless and not args.http:
        raise GatewayError("--stateless applies to --http only")
    # Every check runs before anything binds or launches.
    options = (
        http_options(args.http, config.gateway, token_env=args.token_env, stateless=args.stateless)
        if args.http
        else None
    )
    async with open_gateway(config, hooks=_trace_hooks(args)) as gateway:
        server, router = build_server(gateway, config.gateway)
        await router.check()
        if options is None:
            await serve_stdio(server)
        else:

            def ready(url: str) -> None:
                print(f"agent-gateway: serving MCP on {url}", file=sys.stderr, flush=True)

            await serve_http(server, options, on_ready=ready)
    return 0


def _install(args: argparse.Namespace, config: Config) -> int:
    del config  # loaded (so validated) by main; the client runs it by path
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


def _refuse_client_sampling(gateway: Gateway, name: str) -> None:
    if isinstance(gateway.agents[name].model, ClientSampling):
        raise GatewayError(
            f"agent {name!r}: model 'sampling' needs an MCP client: use `agent-gateway serve` "
            "(or pass --model SPEC)"
        )


def _pick_agent(gateway: Gateway, requested: str | None) -> str:
    if requested is not None:
        return requested
    if len(gateway.agents) == 1:
        return next(iter(gateway.agents))
    names = ", ".join(sorted(gateway.agents)) or "none"
    raise GatewayError(f"choose an agent with --agent (configured: {names})")


def _print_result(result: RunResult, *, label: bool = False) -> int:
    for item in result.items:
        if item.error is not None:
            print(f"error: {item.error}", file=sys.stderr)
        else:
            print(f"answer: {item.output}" if label else item.output)
    return 1 if any(item.error is not None for item in result.items) else 0


def _trace_hooks(args: argparse.Namespace) -> list[TraceHook]:
    hooks: list[TraceHook] = []
    if getattr(args, "trace", False):
        hooks.append(TracePrinter(sys.stderr))
    if getattr(args, "trace_json", False):
        hooks.append(JsonLinesPrinter(sys.stderr))
    return hooks


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-gateway", description="Agents on MCP tools, served over MCP."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")

    def command(name: str, handler: Any, help: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.set_defaults(command=handler)
        sub.add_argument("--config", help="TOML or JSON config (default: ./agent-gateway.toml)")
        return sub

    run = command("run", _run, "ask an agent a question and print its answer")
    run.add_argument("question")
    demo = command("demo", _demo, "run the example agent with its trace; needs no API key")
    demo.add_argument("question", nargs="?", default=DEMO_QUESTION)
    for sub in (run, demo):
        sub.add_argument("--model", help="model spec for every agent, e.g. scripted:FILE")
        sub.add_argument("--agent", help="which agent (default: the only one)")
    run.add_argument("--session", help="chat memory session id")
    resume = command("resume", _resume, "continue a run stored with --state-dir")
    resume.add_argument("run_id")
    resume.add_argument("--model", help="model spec for every agent, e.g. scripted:FILE")
    for sub in (run, resume):
        sub.add_argument(
            "--state-dir",
            required=sub is resume,
            help="store the run's state after every step here, to resume it if it stops",
        )
    tools = command("tools", _tools, "list the tools the config provides")
    del tools
    call = command("call", _call, "call one tool through the gateway and print its result")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="the arguments as a JSON object")
    call.add_argument("--json", action="store_true", help="print the whole MCP result as JSON")
    serve = command("serve", _serve, "serve the agents (and exposed tools) over MCP")
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
    for sub in (run, resume, call, serve):
        sub.add_argument("--trace", action="store_true", help="print the trace to stderr")
        sub.add_argument("--trace-json", action="store_true", help="trace as JSON lines")
    install = command("install", _install, "add the gateway to an MCP client's config")
    install.add_argument("client", choices=["claude-desktop"], help="the client to configure")
    install.add_argument("--name", default="agent-gateway", help="the server's name in the client")
    install.add_argument(
        "--client-config",
        metavar="PATH",
        help="the client's config file (default: its usual place)",
    )
    install.add_argument("--dry-run", action="store_true", help="print the result, write nothing")
    return parser


if __name__ == "__main__":
    sys.exit(main())
