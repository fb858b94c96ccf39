"""Small MCP servers built on the SDK's low-level `Server`, for in-process tests.

`ToyServer` holds a tool table a test can change while clients are connected (and announce
the change on both protocol eras), lists it in pages, and records what its handlers saw.
`CrashableTransport` serves a `Server` over memory streams like a subprocess would, and can
drop the connection the way a crashing process does.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError
from mcp.shared.memory import create_client_server_memory_streams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkits.mcp.server_requests import ASKING

__all__ = [
    "Context",
    "CrashableTransport",
    "ToolHandler",
    "ToyServer",
    "content_kinds_result",
    "declare_logging",
    "text_result",
]

Context = ServerRequestContext[Any, Any]
ToolHandler = Callable[[Context, dict[str, Any]], Awaitable[types.CallToolResult]]

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
WAV_BYTES = b"RIFF" + bytes(96)


def text_result(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)])


def content_kinds_result() -> types.CallToolResult:
    """One block of every content kind, with structured content and `_meta`."""
    return types.CallToolResult(
        content=[
            types.TextContent(text="all kinds"),
            types.ImageContent(data=base64.b64encode(PNG_BYTES).decode(), mime_type="image/png"),
            types.AudioContent(data=base64.b64encode(WAV_BYTES).decode(), mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="memo://notes/1", mime_type="text/plain", text="note one"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="memo://blobs/1",
                    mime_type="application/octet-stream",
                    blob=base64.b64encode(b"xyz").decode(),
                )
            ),
            types.ResourceLink(name="report", uri="memo://reports/7", mime_type="application/pdf"),
        ],
        structured_content={"kinds": 6},
        _meta={"trace": "abc"},
    )


async def _take_level(_ctx: Context, _params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def declare_logging(server: Server[Any]) -> None:
    """`server` declares logging (it takes `logging/setLevel`), as a server that logs should
    and the SDK's `MCPServer` does not; registered directly, for the constructor's handler
    warns (logging is deprecated at 2026-07-28)."""
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _take_level)


async def _no_resources(
    _ctx: Context, _params: types.PaginatedRequestParams | None
) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[])


class ToyServer:
    """A low-level server whose tools a test defines and may change while clients listen."""

    def __init__(
        self,
        name: str = "toy",
        *,
        page_size: int | None = None,
        resources: bool = False,
        logging: bool = False,
    ) -> None:
        """`resources`: it declares the capability, and lists none; `logging`: it declares
        logging (`declare_logging`)."""
        self.page_size = page_size
        self.tools: dict[str, tuple[types.Tool, ToolHandler]] = {}
        self.list_requests = 0
        self.listed_for: list[types.ClientCapabilities | None] = []
        """The client capabilities each tools/list request declared."""
        self.bus = InMemorySubscriptionBus()
        self.server: Server[Any] = Server(
            name,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_subscriptions_listen=ListenHandler(self.bus),
            on_list_resources=_no_resources if resources else None,
        )
        if logging:
            declare_logging(self.server)

    def add(
        self,
        name: str,
        handler: ToolHandler,
        *,
        description: str = "",
        schema: dict[str, Any] | None = None,
    ) -> None:
        tool = types.Tool(
            name=name, description=description, input_schema=schema or {"type": "object"}
        )
        self.tools[name] = (tool, handler)

    def add_echo(self, name: str, *, description: str = "") -> None:
        """A tool answering `name:` plus its arguments, sorted."""

        async def echo(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
            return text_result(f"{name}:{sorted(args.items())}")

        self.add(name, echo, description=description)

    def add_declared(self, name: str) -> None:
        """A tool answering which of sampling, elicitation and roots its request's client
        declared, and how (the repr of their wire JSON)."""

        async def declared(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
            capabilities = ctx.session.client_capabilities or types.ClientCapabilities()
            seen = capabilities.model_dump(mode="json", by_alias=True, exclude_none=True)
            return text_result(repr({key: seen[key] for key in ASKING if key in seen}))

        self.add(name, declared)

    def add_worker(self, name: str, *, interval: float) -> None:
        """`name(steps=3)`: simulated work, a step every `interval` s, each reported as progress."""

        async def work(ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
            steps = int(args.get("steps", 3))
            for step in range(1, steps + 1):
                # The server's own work takes time: what the timeout tests measure is that a
                # call outlasting its timeout survives because progress keeps arriving.
                await anyio.sleep(interval)
                await ctx.session.report_progress(step, steps, f"step {step}")
            return text_result("worked")

        self.add(name, work)

    def add_hanging(self, name: str) -> tuple[anyio.Event, anyio.Event]:
        """`name`: never answers. Returns events set when a call starts and when it is cancelled."""
        started, cancelled = anyio.Event(), anyio.Event()

        async def hang(_ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
            started.set()
            try:
                await anyio.Event().wait()
            finally:
                cancelled.set()
            raise AssertionError("unreachable")

        self.add(name, hang)
        return started, cancelled

    async def announce_change(self, ctx: Context) -> None:
        """Tell the client the tool list changed, the way its protocol era expects."""
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await self.bus.publish(ToolsListChanged())
        else:
            await ctx.session.send_tool_list_changed()

    async def _list_tools(
        self, ctx: Context, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        self.list_requests += 1
        self.listed_for.append(ctx.session.client_capabilities)
        tools = [tool for tool, _ in self.tools.values()]
        if self.page_size is None:
            return types.ListToolsResult(tools=tools)
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + self.page_size
        return types.ListToolsResult(
            tools=tools[start:end], next_cursor=str(end) if end < len(tools) else None
        )

    async def _call_tool(
        self, ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        entry = self.tools.get(params.name)
        if entry is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        return await entry[1](ctx, dict(params.arguments or {}))


class CrashableTransport:
    """Serves `server` over memory streams, one connection per `connect()`; `crash()` kills it.

    `connect` is a transport factory for `McpToolkit(target=...)`. A crash cancels the server
    and closes its end of the streams, which is what the client sees when a process dies.
    """

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        """What the next connection serves (a test may change it: a server restarted anew)."""
        self._scope: anyio.CancelScope | None = None
        self.connections = 0

    def crash(self) -> None:
        assert self._scope is not None, "no live connection"
        self._scope.cancel()

    @asynccontextmanager
    async def connect(self) -> AsyncGenerator[Any]:
        async with (
            create_client_server_memory_streams() as (client_streams, server_streams),
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(self._serve, *server_streams)
            yield client_streams
            tg.cancel_scope.cancel()

    async def _serve(self, read_stream: Any, write_stream: Any) -> None:
        self.connections += 1
        try:
            with anyio.CancelScope() as self._scope:
                await self.server.run(
                    read_stream, write_stream, self.server.create_initialization_options()
                )
        finally:
            await write_stream.aclose()
