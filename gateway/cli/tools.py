"""`tools` lists what the config provides; `call` calls one tool through the gateway."""

from __future__ import annotations

import argparse
import json
from typing import Any, cast

from toolkits import result_text
from toolkits.mcp import McpToolkit

from ..app import open_gateway
from ..errors import GatewayError
from .common import Commands, add_trace_options, config_of, trace_hooks

__all__ = ["register"]


def register(commands: Commands) -> None:
    commands.add("tools", _tools, "list the tools the config provides")
    call = commands.add("call", _call, "call one tool through the gateway and print its result")
    call.add_argument("tool")
    call.add_argument("--args", default="{}", help="the arguments as a JSON object")
    call.add_argument("--json", action="store_true", help="print the whole MCP result as JSON")
    add_trace_options(call)


async def _tools(args: argparse.Namespace) -> int:
    async with open_gateway(config_of(args)) as gateway:
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
        # Read while the servers run: once closed, every one of them is "stopped".
        down = [server for server in servers if server.health.state != "ready"]
    return 1 if down else 0


async def _call(args: argparse.Namespace) -> int:
    try:
        arguments: Any = json.loads(args.args)
    except json.JSONDecodeError as exc:
        raise GatewayError(f"--args is not valid JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise GatewayError("--args must be a JSON object")
    arguments = cast(dict[str, Any], arguments)
    async with open_gateway(config_of(args), hooks=trace_hooks(args)) as gateway:
        result = await gateway.call_tool(args.tool, arguments)
    if args.json:
        print(result.model_dump_json(by_alias=True, exclude_none=True))
    else:
        print(result_text(result))
    return 1 if result.is_error else 0
