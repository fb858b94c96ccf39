"""A downstream whose `pass {"who": ...}` calls wait for a ticket each (`let_through`);
`started` says whose calls reached it, in order. Served in process (`toy`) or by an SDK
server (`server`, e.g. over HTTP)."""

from __future__ import annotations

from typing import Any, Self

import anyio
import mcp_types as types
from mcp.server import MCPServer

from tests.servers.inprocess import Context, ToyServer, text_result

__all__ = ["Turnstile"]


class Turnstile:
    def __init__(self) -> None:
        self.started: list[str] = []
        self._changed = anyio.Event()
        self._send, self._tickets = anyio.create_memory_object_stream[None](1000)
        self.toy = ToyServer("gate")
        self.toy.add("pass", self._toy_pass)
        self.server = MCPServer("down")

        @self.server.tool(name="pass")
        async def pass_(who: str) -> str:  # pyright: ignore[reportUnusedFunction]
            """Wait for a ticket."""
            return await self._pass(who)

    async def _pass(self, who: str) -> str:
        self.started.append(who)
        self._changed.set()
        await self._tickets.receive()
        return "through"

    async def _toy_pass(self, _ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        return text_result(await self._pass(str(args["who"])))

    def let_through(self, count: int) -> None:
        for _ in range(count):
            self._send.send_nowait(None)

    async def until_started(self, count: int) -> None:
        while len(self.started) < count:
            self._changed = anyio.Event()
            await self._changed.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._send.close()
        self._tickets.close()
