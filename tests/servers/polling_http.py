"""An SDK server over real HTTP that uses SSE polling (MCP 2025-11-25, SEP-1699): its `polled`
tool closes the call's event stream (`ctx.close_sse_stream`, with an event store) and answers
only once the client has come back for it with a GET and `Last-Event-ID`; its `never` tool
closes the stream and never answers.

`Polling` is ASGI middleware around the server's app: it notes each resuming GET and holds it
until the answer is stored, so that the answer is replayed on it, whatever the timing (the
SDK server's own order of a replay and its live stream is no concern of these tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage, JSONRPCResponse
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["EventsKept", "Polling", "polling_server"]


@dataclass
class EventsKept(EventStore):
    """Every event of every stream, in memory."""

    events: list[tuple[StreamId, EventId, JSONRPCMessage | None]] = field(
        default_factory=list[tuple[StreamId, EventId, JSONRPCMessage | None]]
    )
    _answered: dict[StreamId, anyio.Event] = field(default_factory=dict[StreamId, anyio.Event])

    def answered(self, stream_id: StreamId) -> anyio.Event:
        """Set once a response is stored on the stream `stream_id`."""
        return self._answered.setdefault(stream_id, anyio.Event())

    async def answer_after(self, event_id: EventId) -> None:
        """Wait until the stream of the event `event_id` (if stored) has its response."""
        streams = [stream for stream, stored, _ in self.events if stored == event_id]
        if streams:
            await self.answered(streams[0]).wait()

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        event_id = f"e{len(self.events) + 1}"
        self.events.append((stream_id, event_id, message))
        if isinstance(message, JSONRPCResponse):
            self.answered(stream_id).set()
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        ids = [event_id for _, event_id, _ in self.events]
        if last_event_id not in ids:
            return None
        at = ids.index(last_event_id)
        stream_id = self.events[at][0]
        for stream, event_id, message in self.events[at + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


@dataclass
class Polling:
    """The server's app, with the resuming GETs noted (`resumed_after`: their
    `Last-Event-ID`s) and each held until an answer is stored."""

    app: ASGIApp
    store: EventsKept
    resumed: anyio.Event = field(default_factory=anyio.Event)
    resumed_after: list[str] = field(default_factory=list[str])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            headers: dict[bytes, bytes] = dict(scope["headers"])
            last = headers.get(b"last-event-id")
            if last is not None:
                self.resumed_after.append(last.decode())
                self.resumed.set()
                await self.store.answer_after(last.decode())
        await self.app(scope, receive, send)


def polling_server(**options: Any) -> Polling:
    """The app of a server whose `polled` tool answers `polled TEXT` on the stream the client
    resumes; `options`: more of `streamable_http_app`'s (`retry_interval`)."""
    server = MCPServer("polling")
    store = EventsKept()
    front: list[Polling] = []

    @server.tool()
    async def polled(text: str, ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Close the call's stream, and answer once the client has resumed it."""
        await ctx.close_sse_stream()
        await front[0].resumed.wait()
        return f"polled {text}"

    @server.tool()
    async def never(ctx: Context) -> str:  # pyright: ignore[reportUnusedFunction]
        """Close the call's stream, and never answer (until cancelled)."""
        await ctx.close_sse_stream()
        await anyio.sleep_forever()
        return "never"

    @server.tool()
    def quick(text: str) -> str:  # pyright: ignore[reportUnusedFunction]
        """Answer at once."""
        return f"quick {text}"

    app = server.streamable_http_app(host="127.0.0.1", event_store=store, **options)
    front.append(Polling(app, store))
    return front[0]
