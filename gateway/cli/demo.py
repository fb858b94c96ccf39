"""`demo`: the example agent with its trace, on a scripted model when none is configured.

With the built-in config, the agent's tools are a local function (`calculator`) and an MCP
server the gateway starts (`toolbox`, shipped with the package), so the trace shows a call
going from the agent through the gateway to the MCP server and back. `--serve` puts an MCP
client in front: it calls the agent as a tool of the gateway's own MCP server.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import TextIO

from mcp import Client

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel
from toolkits import HasHealth, result_text

from ..assembly import open_gateway
from ..config import Config
from ..console import open_terminal_console
from ..engine import Gateway
from ..errors import ConfigError
from ..model_specs import NoModel
from ..trace import TracePrinter
from .common import Commands, add_model_options, check_runnable, config_of, pick_agent
from .exits import FAILED, OK
from .output import result_stdout
from .results import print_result
from .signals import stopping_shown

__all__ = ["DEMO_QUESTION", "DEMO_SCRIPT", "register"]

DEMO_QUESTION = (
    "A marathon is 26.2 miles. How many kilometres is that, and how long does it take "
    "at 6 minutes per kilometre?"
)
DEMO_SCRIPT = [
    ScriptedAnswer(
        tool_calls=[
            ScriptedCall(
                name="toolbox__convert_units",
                arguments={"value": 26.2, "from_unit": "mi", "to_unit": "km"},
            )
        ]
    ),
    ScriptedAnswer(
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "42.164813 * 6"})]
    ),
    ScriptedAnswer(
        content="A marathon is 42.16 km; at 6 minutes per kilometre it takes about 253 "
        "minutes (4 h 13 min)."
    ),
]
"""What the scripted demo model answers: a call to the MCP server, one to the local
calculator, then the answer. Its tools (not its numbers) are real."""


def register(commands: Commands) -> None:
    demo = commands.add("demo", _demo)
    demo.add_argument(
        "question", nargs="?", default=DEMO_QUESTION, help="the question (default: a marathon's)"
    )
    add_model_options(demo)
    demo.add_argument(
        "--serve",
        action="store_true",
        help="call the agent as an MCP tool of the gateway, through an MCP client",
    )


async def _demo(args: argparse.Namespace) -> int:
    config = config_of(args)
    name = pick_agent(config, args.agent)
    async with stopping_shown(open_terminal_console(result_stdout(), sys.stderr)) as console:
        out = console.stream(result_stdout())  # lines written around the live status line
        hooks = [console, TracePrinter(out)]
        async with open_gateway(config, model=args.model, hooks=hooks) as gateway:
            question: str = args.question
            scripted = await _scripted_if_no_model(gateway, name, out, _without(args, config))
            if scripted and question != DEMO_QUESTION:
                print(
                    "The scripted model answers only its own question, so it is asked instead "
                    "of yours;\npass --model SPEC to ask yours.\n",
                    file=out,
                )
                question = DEMO_QUESTION
            check_runnable(gateway, name)
            _show_nodes(gateway, name, out)
            print(f"question: {question}", file=out)
            if args.serve:
                return await _through_mcp(gateway, config, name, question, out)
            result = await gateway.run(name, question, stream=True)
    print(file=result_stdout())
    return print_result(result, label=True)


def _without(args: argparse.Namespace, config: Config) -> str:
    """How to run the demo on the built-in config instead of `config`: the one the demo's
    script is written for."""
    if args.config is not None:
        return "run the demo without --config"
    return f"run the demo in a folder without {config.source} (found in this one)"


async def _scripted_if_no_model(gateway: Gateway, name: str, out: TextIO, without: str) -> bool:
    """Give the agent the scripted demo model when it has none; whether it did. `without`
    says how to run the demo on the built-in config, whose tools the script calls."""
    spec = gateway.agents[name]
    if not isinstance(spec.model, NoModel):
        return False
    tools = await gateway.tools_for(spec)
    missing = sorted({call.name for a in DEMO_SCRIPT for call in a.tool_calls} - set(tools))
    if missing:
        raise ConfigError(
            f"agent {name!r} has no model, and the scripted demo model calls tools it does not "
            f"have ({', '.join(missing)}): pass --model SPEC, or {without}"
        )
    print(
        "No model configured: using the SCRIPTED demo model. It replays a fixed script; the\n"
        "tool calls below are real. Pass --model SPEC to use a real model.\n",
        file=out,
    )
    model = ScriptedModel(DEMO_SCRIPT, name="scripted-demo")
    gateway.agents[name] = dataclasses.replace(spec, model=model)
    return True


def _show_nodes(gateway: Gateway, name: str, out: TextIO) -> None:
    """Where the agent's tools come from: local functions, MCP servers (and their health)."""
    for node_name in gateway.agents[name].tools:
        node = gateway.nodes.get(node_name)
        if isinstance(node, HasHealth):
            print(f"node {node.health}  (an MCP server this gateway started)", file=out)
        elif node_name in gateway.agents:
            print(f"node {node_name}: an agent", file=out)
        else:
            print(f"node {node_name}: local Python function", file=out)


async def _through_mcp(
    gateway: Gateway, config: Config, name: str, question: str, out: TextIO
) -> int:
    """Serve the gateway over MCP in this process and call the agent as a tool, as Claude
    Desktop or any MCP client would (`agent-gateway serve` does the same over stdio/HTTP)."""
    from ..server import build_server  # the other demo needs no server

    server, _router = build_server(gateway, config.gateway)

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        print(f"client <- progress {progress:g}: {message}", file=out)

    async with Client(server) as client:
        listed = await client.list_tools()
        print(f"client -> tools/list: {', '.join(tool.name for tool in listed.tools)}", file=out)
        print(f"client -> tools/call {name} {json.dumps({'prompt': question})}", file=out)
        result = await client.call_tool(name, {"prompt": question}, progress_callback=progress)
    print(file=out)
    print(f"client <- {'error' if result.is_error else 'result'}: {result_text(result)}", file=out)
    return FAILED if result.is_error else OK
