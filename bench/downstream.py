"""The benchmarks' downstream MCP server: a low-level SDK `Server` with echo, blob and sleep.

    python bench/downstream.py --stdio [--tools N]
    python bench/downstream.py --http [--servers N] [--tools-per-server N] [--wide N]

Tools: `echo(message)` returns the message; `blob(n)` returns n bytes of text; `sleep(ms)`
waits, then answers; `filler_K(text)` pad the list to N tools (with realistic descriptions and
schemas, so a tools/list costs what a real one does).

Over HTTP (127.0.0.1, a free port) one process serves several servers, each its own MCP
endpoint: `/mcp` (echo, blob, sleep), `/wide/mcp` (padded to `--wide` tools) and
`/s0/mcp` .. `/s{N-1}/mcp` (padded to `--tools-per-server`), so a gateway can have 50
downstream servers without 50 processes. It prints `bench-downstream: serving on BASE_URL`
to stderr once it listens.

A standalone script: it imports only the SDK, so any venv with mcp 2.x runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import sys
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import mcp_types as types
import uvicorn
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

READY = "bench-downstream: serving on "
BASE_TOOLS = ("echo", "blob", "sleep")
_TEXT = "the quick brown fox jumps over the lazy dog 0123456789 "


def _tool(name: str, description: str, prop: str, kind: str) -> types.Tool:
    schema = {
        "type": "object",
        "properties": {prop: {"type": kind, "description": f"The {prop} to use."}},
        "required": [prop],
    }
    return types.Tool(name=name, description=description, input_schema=schema)


def tool_list(count: int) -> list[types.Tool]:
    """echo, blob, sleep, then fillers up to `count` tools (at least the three)."""
    tools = [
        _tool("echo", "Return the message unchanged.", "message", "string"),
        _tool("blob", "Return n bytes of text.", "n", "integer"),
        _tool("sleep", "Wait this many milliseconds, then answer.", "ms", "integer"),
    ]
    tools += [
        _tool(
            f"filler_{k}",
            f"Filler tool number {k}: looks up a record by its text key and returns it.",
            "text",
            "string",
        )
        for k in range(max(0, count - len(tools)))
    ]
    return tools


def blob_text(n: int) -> str:
    return (_TEXT * (n // len(_TEXT) + 1))[:n]


def bench_server(name: str, tool_count: int = 3) -> Server[Any]:
    tools = types.ListToolsResult(tools=tool_list(tool_count))

    async def list_tools(_ctx: Any, _params: Any) -> types.ListToolsResult:
        return tools

    async def call_tool(_ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        arguments = params.arguments or {}
        if params.name == "echo":
            text = str(arguments.get("message", ""))
        elif params.name == "blob":
            text = blob_text(int(arguments.get("n", 0)))
        elif params.name == "sleep":
            await anyio.sleep(int(arguments.get("ms", 0)) / 1000)
            text = "slept"
        elif params.name.startswith("filler_"):
            text = f"record {arguments.get('text', '')}"
        else:
            return types.CallToolResult(
                content=[types.TextContent(text=f"unknown tool {params.name}")], is_error=True
            )
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def http_app(servers: dict[str, Server[Any]]) -> Starlette:
    """Each server at `/{path}/mcp` (the empty path at `/mcp`), with the SDK's defaults."""
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*"],
        allowed_origins=["http://127.0.0.1:*"],
    )
    managers = {
        path: StreamableHTTPSessionManager(app=server, security_settings=security)
        for path, server in servers.items()
    }

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncGenerator[None]:
        async with contextlib.AsyncExitStack() as stack:
            for manager in managers.values():
                await stack.enter_async_context(manager.run())
            yield

    routes = [
        Route(f"/{path}/mcp" if path else "/mcp", endpoint=StreamableHTTPASGIApp(manager))
        for path, manager in managers.items()
    ]
    return Starlette(routes=routes, lifespan=lifespan)


async def serve_http(servers: dict[str, Server[Any]], keep_alive: int = 120) -> None:
    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on such sockets' connections (no Nagle delay).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    # uvicorn's 5 s keep-alive is the mcp `Client`'s own idle limit: a client idle that long
    # sends its next call as the server closes the connection and dies of it (the direct
    # arm's `clients` workload lost rounds so: bench/RESULTS.md, item 56).
    config = uvicorn.Config(
        http_app(servers),
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=1,
        timeout_keep_alive=keep_alive,
    )
    with sock:
        print(f"{READY}http://127.0.0.1:{sock.getsockname()[1]}", file=sys.stderr, flush=True)
        await uvicorn.Server(config).serve(sockets=[sock])


async def serve_stdio(server: Server[Any]) -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true")
    transport.add_argument("--http", action="store_true")
    parser.add_argument("--tools", type=int, default=3, help="stdio: tools in the list")
    parser.add_argument("--servers", type=int, default=0, help="http: /s{i}/mcp servers")
    parser.add_argument("--tools-per-server", type=int, default=20)
    parser.add_argument("--wide", type=int, default=100, help="http: tools at /wide/mcp")
    parser.add_argument(
        "--keep-alive", type=int, default=120, help="http: seconds an idle connection stays open"
    )
    options = parser.parse_args()
    if options.stdio:
        anyio.run(serve_stdio, bench_server("bench", options.tools))
        return
    servers = {"": bench_server("bench"), "wide": bench_server("wide", options.wide)}
    for i in range(options.servers):
        servers[f"s{i}"] = bench_server(f"s{i}", options.tools_per_server)
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(serve_http, servers, options.keep_alive)


if __name__ == "__main__":
    main()
