"""A gateway served over a socket pair as `serve --stdio` serves its pipes (`serve_pipes`), and
its clients: the SDK's `Client` over the socket, and raw JSON-RPC lines for what only the wire
shows."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

from gateway import ApprovalRule, Gateway
from gateway.server import serve_pipes
from gateway.server.served.stdio_shortcut import StdioShortcut
from toolkits.mcp import McpServerConfig, McpToolkit, Target

from .support import serve

JsonObject = dict[str, Any]
_LINE_LIMIT = 16 << 20


class StdioFront:
    """One gateway serving node `d` on one end of a socket pair; the other end is ours."""

    def __init__(
        self, stream: anyio.abc.SocketStream, shortcut: StdioShortcut, node: McpToolkit
    ) -> None:
        self.stream = stream
        self.shortcut = shortcut
        self.node = node
        self._lines = BufferedByteReceiveStream(stream)

    @property
    def forwarded(self) -> int:
        passing = self.shortcut.passing
        return passing.forwarded if passing is not None else 0

    async def send(self, *messages: JsonObject) -> None:
        """`messages` as lines, in one write."""
        await self.stream.send(b"".join(json.dumps(m).encode() + b"\n" for m in messages))

    async def receive(self) -> JsonObject:
        return cast(JsonObject, json.loads(await self.line()))

    async def line(self) -> bytes:
        """The next line, as written."""
        return await self._lines.receive_until(b"\n", _LINE_LIMIT)

    async def end(self) -> list[JsonObject]:
        """Close stdin: the lines the gateway still writes before it stops."""
        await self.stream.send_eof()  # again on exit: a no-op
        rest: list[JsonObject] = []
        while True:
            try:
                rest.append(await self.receive())
            except anyio.IncompleteRead:  # its stdout ended
                return rest

    @asynccontextmanager
    async def client(self) -> AsyncGenerator[TransportStreams]:
        """The socket as a transport of the SDK's `Client` (its messages as lines)."""
        to_client, client_reads = anyio.create_memory_object_stream[SessionMessage | Exception]()
        client_writes, to_server = anyio.create_memory_object_stream[SessionMessage]()

        async def read() -> None:
            async with to_client:
                while True:
                    try:
                        line = await self._lines.receive_until(b"\n", _LINE_LIMIT)
                    except (anyio.EndOfStream, anyio.IncompleteRead):
                        return
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    try:
                        await to_client.send(SessionMessage(message))
                    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                        # The client's session ended (as the SDK's stdio transport has it): a
                        # late line, such as a node's list change, is nobody's.
                        return

        async def write() -> None:
            async with to_server:
                async for message in to_server:
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await self.stream.send(data.encode() + b"\n")

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            tg.start_soon(write)
            async with client_reads, client_writes:
                yield client_reads, client_writes
            tg.cancel_scope.cancel()


@asynccontextmanager
async def stdio_front(
    config: McpServerConfig,
    *,
    pass_through: bool = True,
    target: Target | None = None,
    approvals: Mapping[str, ApprovalRule] | None = None,
    **settings: Any,
) -> AsyncGenerator[StdioFront]:
    """A gateway exposing the tools of node `d` (`config`; `target`: an in-process server)
    over a socket pair, served as over stdio until we close our end; `approvals`: its nodes'
    approval rules."""
    async with McpToolkit("d", config, target=target) as node:
        node.raw_calls = pass_through  # off: the usual path, the SDK's at both ends
        # One id for every front: both paths' listings are compared, `_meta` and all.
        gateway = Gateway([node], [], gateway_id="front", approvals=approvals)
        server = serve(gateway, expose_tools=True, pass_through=pass_through, **settings)
        ours, theirs = socket.socketpair()
        with theirs:
            stream = await anyio.abc.SocketStream.from_socket(ours)

            async def run() -> None:
                await serve_pipes(server, theirs.fileno(), theirs.fileno())
                theirs.shutdown(socket.SHUT_WR)  # its stdout ends as the process exits

            async with stream, anyio.create_task_group() as tg:
                tg.start_soon(run)
                try:
                    shortcut = getattr(server, "stdio_shortcut", None)
                    assert isinstance(shortcut, StdioShortcut)
                    yield StdioFront(stream, shortcut, node)
                finally:
                    await stream.send_eof()  # the client closes stdin: the server stops
