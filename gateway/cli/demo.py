"""`demo`: the example agent with its trace, on a scripted model when none is configured."""

from __future__ import annotations

import argparse
import dataclasses
import sys

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel

from ..app import open_gateway
from ..console import open_terminal_console
from ..models import NoModel
from ..trace import TracePrinter
from .common import Commands, add_model_options, check_runnable, config_of, pick_agent
from .results import print_result

__all__ = ["DEMO_QUESTION", "register"]

DEMO_QUESTION = "A shirt costs 25 dollars. How much do 17 shirts cost?"
DEMO_SCRIPT = [
    ScriptedAnswer(
        tool_calls=[ScriptedCall(name="calculator", arguments={"expression": "17 * 25"})]
    ),
    ScriptedAnswer(content="17 shirts cost 425 dollars."),
]


def register(commands: Commands) -> None:
    demo = commands.add("demo", _demo, "run the example agent with its trace; needs no API key")
    demo.add_argument("question", nargs="?", default=DEMO_QUESTION)
    add_model_options(demo)


async def _demo(args: argparse.Namespace) -> int:
    config = config_of(args)
    name = pick_agent(config, args.agent)
    async with (
        open_terminal_console(sys.stdout, sys.stderr) as console,
        open_gateway(
            config, model=args.model, hooks=[console, TracePrinter(console.stream(sys.stdout))]
        ) as gateway,
    ):
        spec = gateway.agents[name]
        if isinstance(spec.model, NoModel):
            print(
                "No model configured: using the SCRIPTED demo model. It replays a fixed script;\n"
                "the calculator call below is real. Pass --model SPEC to use a real model.\n"
            )
            demo_model = ScriptedModel(DEMO_SCRIPT, name="scripted-demo")
            gateway.agents[name] = dataclasses.replace(spec, model=demo_model)
        check_runnable(gateway, name)
        print(f"question: {args.question}")
        result = await gateway.run(name, args.question, stream=True)
    print()
    return print_result(result, label=True)
