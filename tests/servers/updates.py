"""An in-process MCP server whose resources a test updates, for the subscription tests.

`UpdatingServer` serves some text resources and takes subscriptions in both protocol eras:
`resources/subscribe` and `resources/unsubscribe` on handshake-era connections, the URIs a
`subscriptions/listen` stream names on 2026-07-28 ones. `await server.update(uri)` (or its
tool `update`) tells who subscribed to `uri` that it changed, the way each era expects. It counts, per URI, the
subscriptions it was asked for and the ones that ended (a request, or a listen stream naming
the URI), across eras. `subscribe=False` builds it without subscriptions at all.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError

from .inprocess import Context, text_result

__all__ = ["UpdatingServer"]


class UpdatingServer:
    """See the module docstring. Handshake-era subscribers are kept one per URI (the last)."""

    def __init__(self, name: str, *uris: str, subscribe: bool = True) -> None:
        self.texts = {uri: f"the text of {uri}" for uri in uris}
        self.began: Counter[str] = Counter()
        """Per URI: `resources/subscribe` requests, and listen streams opened naming it."""
        self.ended: Counter[str] = Counter()
        """Per URI: `resources/unsubscribe` requests, and listen streams naming it that ended."""
        self.bus = InMemorySubscriptionBus()
        self._listen = ListenHandler(self.bus)
        self._sessions: dict[str, ServerSession] = {}
        self._changed = anyio.Event()
        self.server: Server[Any] = Server(
            name,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_read_resource=self._read,
            on_subscribe_resource=self._subscribe if subscribe else None,
            on_unsubscribe_resource=self._unsubscribe if subscribe else None,
            on_subscriptions_listen=self._listen_stream if subscribe else None,
        )

    async def update(self, uri: str, *, under: str | None = None) -> None:
        """Tell the subscribers of `uri` that it changed; with `under`, tell the handshake-era
        subscriber of `under` (the spec lets a server name a sub-resource of a subscribed one)."""
        await self.bus.publish(ResourceUpdated(uri))
        session = self._sessions.get(under or uri)
        if session is not None:
            await session.send_resource_updated(uri)

    def end_streams(self) -> None:
        """End every open listen stream gracefully (as a server going away does)."""
        self._listen.close()

    async def until(self, predicate: Callable[[], bool]) -> None:
        """Wait until `predicate()` holds (checked now and after every subscription change)."""
        while not predicate():
            await self._changed.wait()

    def _note(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def _subscribe(
        self, ctx: Context, params: types.SubscribeRequestParams
    ) -> types.EmptyResult:
        self._sessions[params.uri] = ctx.session
        self.began[params.uri] += 1
        self._note()
        return types.EmptyResult()

    async def _unsubscribe(
        self, ctx: Context, params: types.UnsubscribeRequestParams
    ) -> types.EmptyResult:
        self._sessions.pop(params.uri, None)
        self.ended[params.uri] += 1
        self._note()
        return types.EmptyResult()

    async def _listen_stream(
        self, ctx: Context, params: types.SubscriptionsListenRequestParams
    ) -> types.SubscriptionsListenResult:
        uris = list(params.notifications.resource_subscriptions or ())
        self.began.update(uris)
        self._note()
        try:
            return await self._listen(ctx, params)
        finally:
            self.ended.update(uris)
            self._note()

    async def _list_tools(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[types.Tool(name="update", input_schema={"type": "object"})]
        )

    async def _call_tool(
        self, _ctx: Context, params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        uri = str((params.arguments or {}).get("uri", ""))
        await self.update(uri)
        return text_result(f"updated {uri}")

    async def _list_resources(
        self, _ctx: Context, _params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(uri=uri, name=uri.rsplit("/", 1)[-1], mime_type="text/plain")
                for uri in self.texts
            ]
        )

    async def _read(
        self, _ctx: Context, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        text = self.texts.get(params.uri)
        if text is None:
            raise MCPError(types.INVALID_PARAMS, f"no resource {params.uri}")
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=params.uri, text=text, mime_type="text/plain")]
        )
