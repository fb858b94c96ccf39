"""Subscriptions to one server's resource updates: callbacks per URI, the server asked once.

    unsubscribe = await node.subscribe_resource("file:///notes.md", on_updated)
    ...
    await unsubscribe()

The first local subscriber to a URI subscribes at the server and the last one to leave
unsubscribes there: with `resources/subscribe` and `resources/unsubscribe` on a handshake-era
session (2025-11-25); on a 2026-07-28 session, with one `subscriptions/listen` stream naming
every subscribed URI (a changed set opens a new stream, acknowledged before the old one closes,
so no update falls between them; a stream the server drops is opened again). A new session
after a reconnect is subscribed to them all again. Changes reach the server one at a time,
each within the node's `timeout`; leaving waits 5 s at most (the server may keep sending
updates nobody follows; they are dropped, and the next change unsubscribes again).

An update (`notifications/resources/updated`, which the session hands over in both eras) goes
to the callbacks of its URI and of each subscribed URI it lies under (a server may name a
sub-resource), each callback once, with the URI the server named. The same callback subscribed
twice counts twice and is called once: a relay that subscribes one callback for many of its
own clients gets each update once.

Errors: `NotOffered` when the server says it has no resource subscriptions (or did not take
that URI); `ServerUnavailable` when it is down or does not answer in time; the server's own
refusal as the `MCPError` it sent.
"""

from __future__ import annotations

import logging
import math
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass, field
from functools import partial

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.client.subscriptions import Subscription, SubscriptionLost
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..capabilities import ResourceUpdatedCallback, Unsubscribe
from ..errors import NotOffered, ServerUnavailable, ToolkitError
from .connection import Connection, lost_during
from .error_text import describe_error
from .session import OwnedSession

__all__ = ["ResourceSubscriptions"]

_RELISTEN_DELAY = 1.0
_LET_GO_TIMEOUT = 5.0


class ResourceSubscriptions:
    """Who follows which of one server's resources, and what the server was asked for."""

    def __init__(
        self, node: str, session: OwnedSession, *, timeout: float, log: logging.Logger
    ) -> None:
        self._node = node
        self._session = session
        self._timeout = timeout
        self._log = log
        self._callbacks: dict[str, dict[ResourceUpdatedCallback, int]] = {}
        self._lock = anyio.Lock()  # one change at a time reaches the server
        self._live: _Live | None = None

    @property
    def offered(self) -> bool:
        """Whether the live session's server offers them (unknown capabilities count as yes)."""
        conn = self._session.live
        return conn is not None and _offers(conn)

    async def subscribe(self, uri: str, on_updated: ResourceUpdatedCallback) -> Unsubscribe:
        """Follow `uri`; see the module docstring for what is raised."""
        async with self._lock:
            callbacks = self._callbacks.setdefault(uri, {})
            callbacks[on_updated] = callbacks.get(on_updated, 0) + 1
            try:
                # Once more on the next session if the server no longer knew this one.
                await self._session.on_live(partial(self._subscribe_on, uri))
            except MCPError as exc:
                self._forget(uri, on_updated)
                if exc.code != mcp_types.METHOD_NOT_FOUND:
                    raise
                raise NotOffered(  # capabilities were unknown (`protocol = "modern"`)
                    f"MCP server {self._node!r} does not offer resource subscriptions "
                    f"({exc.error.message})",
                    node=self._node,
                ) from exc
            except BaseException:
                self._forget(uri, on_updated)
                raise
        ended = False

        async def unsubscribe() -> None:
            nonlocal ended
            if ended:
                return
            ended = True
            self._forget(uri, on_updated)
            if uri in self._callbacks:
                return
            # Best effort, and briefly: it runs as clients leave and the gateway stops, and an
            # update nobody follows any more is only dropped (the next change tries again).
            with anyio.move_on_after(min(self._timeout, _LET_GO_TIMEOUT)):
                async with self._lock:
                    conn = self._session.live
                    if conn is not None:  # a server that is down holds nothing for us
                        await self._sync(conn)

        return unsubscribe

    async def _subscribe_on(self, uri: str, conn: Connection) -> None:
        if not _offers(conn):
            raise NotOffered(
                f"MCP server {self._node!r} does not offer resource subscriptions",
                node=self._node,
            )
        await self._sync(conn, must=uri)

    async def updated(self, uri: str) -> None:
        """Hand the server's update of `uri` to the callbacks it concerns."""
        chosen: dict[ResourceUpdatedCallback, None] = {}
        for subscribed, callbacks in list(self._callbacks.items()):
            if _covers(subscribed, uri):
                chosen.update(dict.fromkeys(callbacks))
        if not chosen:
            self._log.debug("the server updated %r, which nobody follows", uri)
        for callback in chosen:
            try:
                await callback(uri)
            except Exception:  # a subscriber's bug must not touch the session or the others
                self._log.exception("a resource-updated callback failed")

    async def serve(self, conn: Connection, client: Client) -> None:
        """Beside each live session: subscribe it to what is followed, and keep its stream."""
        live = self._live_on(conn)
        async with anyio.create_task_group() as tg:
            if live.keeper is not None:
                tg.start_soon(live.keeper.run)
            if self._callbacks:
                async with self._lock:
                    if self._session.live is conn:
                        try:
                            await self._sync(conn)
                        except Exception:  # a bug here must not take the session down
                            self._log.exception("could not subscribe to the resources again")

    def _forget(self, uri: str, callback: ResourceUpdatedCallback) -> None:
        callbacks = self._callbacks.get(uri)
        if callbacks is None or callback not in callbacks:
            return
        callbacks[callback] -= 1
        if callbacks[callback] <= 0:
            del callbacks[callback]
        if not callbacks:
            del self._callbacks[uri]

    def _live_on(self, conn: Connection) -> _Live:
        live = self._live
        if live is None or live.conn is not conn:
            assert conn.client is not None
            keeper = None
            if conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                keeper = _ListenKeeper(self._node, conn.client, self._timeout, self._log)
            live = self._live = _Live(conn, keeper)
        return live

    async def _sync(self, conn: Connection, *, must: str | None = None) -> None:
        """Bring what the server holds on `conn` to what is followed (with the lock held).

        A failure for `must` is raised; others are logged (the next change tries again).
        """
        live = self._live_on(conn)
        wanted = frozenset(self._callbacks)
        if live.keeper is None:
            await self._sync_requests(live, wanted, must)
            return
        if wanted == live.asked:
            return
        try:
            with anyio.fail_after(self._timeout):
                honored = await live.keeper.apply(wanted)
        except TimeoutError as exc:
            if must is not None:
                raise self._no_answer("subscriptions/listen") from exc
            self._log.warning("could not change resource subscriptions: no answer in time")
            return
        except (ToolkitError, MCPError) as exc:
            if must is not None:
                raise
            self._log.warning("could not change resource subscriptions: %s", describe_error(exc))
            return
        live.asked = wanted
        refused = wanted - honored
        if must in refused:
            raise NotOffered(
                f"MCP server {self._node!r} did not take a subscription to {must!r}",
                node=self._node,
            )
        if refused:
            self._log.warning("the server did not take subscriptions to %s", sorted(refused))

    async def _sync_requests(self, live: _Live, wanted: frozenset[str], must: str | None) -> None:
        for uri in sorted(wanted - live.asked):
            request = mcp_types.SubscribeRequest(params=mcp_types.SubscribeRequestParams(uri=uri))
            try:
                await self._request(live.conn, f"resources/subscribe {uri!r}", request)
            except (ToolkitError, MCPError) as exc:
                if uri == must:
                    raise
                self._log.warning("could not subscribe to %r: %s", uri, describe_error(exc))
            else:
                live.asked |= {uri}
        for uri in sorted(live.asked - wanted):
            live.asked -= {uri}
            request = mcp_types.UnsubscribeRequest(
                params=mcp_types.UnsubscribeRequestParams(uri=uri)
            )
            try:
                await self._request(live.conn, f"resources/unsubscribe {uri!r}", request)
            except (ToolkitError, MCPError) as exc:
                self._log.warning("could not unsubscribe from %r: %s", uri, describe_error(exc))

    async def _request(
        self,
        conn: Connection,
        what: str,
        request: mcp_types.SubscribeRequest | mcp_types.UnsubscribeRequest,
    ) -> None:
        assert conn.client is not None
        try:
            with anyio.fail_after(self._timeout):
                # The session's own methods for these warn: they are gone at 2026-07-28.
                await conn.client.session.send_request(request, mcp_types.EmptyResult)
        except TimeoutError as exc:
            raise self._no_answer(what) from exc
        except MCPError as exc:
            lost = lost_during(self._node, conn, exc, what)
            if lost is not None:
                raise lost from exc
            raise

    def _no_answer(self, what: str) -> ServerUnavailable:
        return ServerUnavailable(
            f"MCP server {self._node!r} did not answer {what} within {self._timeout:g} s",
            node=self._node,
        )


def _offers(conn: Connection) -> bool:
    assert conn.client is not None
    capabilities = conn.client.server_capabilities
    if capabilities == mcp_types.ServerCapabilities():
        return True  # unknown (no discovery, `protocol = "modern"`): ask
    return capabilities.resources is not None and bool(capabilities.resources.subscribe)


def _covers(subscribed: str, uri: str) -> bool:
    """Whether an update of `uri` concerns a subscriber of `subscribed` (itself or under it)."""
    return uri == subscribed or uri.startswith(subscribed.rstrip("/") + "/")


@dataclass(eq=False)
class _Live:
    """What the server holds for us on one session."""

    conn: Connection
    keeper: _ListenKeeper | None
    """The listen stream's owner on a 2026-07-28 session (None: handshake era)."""
    asked: frozenset[str] = frozenset()


@dataclass(eq=False)
class _Change:
    uris: frozenset[str]
    reopen: _Stream | None = None
    """Set when a dropped stream is opened again (nobody waits for that)."""
    done: anyio.Event = field(default_factory=anyio.Event)
    honored: frozenset[str] = frozenset()
    error: ToolkitError | MCPError | None = None

    def settle(
        self, honored: frozenset[str] = frozenset(), error: ToolkitError | MCPError | None = None
    ) -> None:
        self.honored, self.error = honored, error
        self.done.set()


@dataclass(eq=False)
class _Stream:
    uris: frozenset[str]
    honored: frozenset[str]
    exits: AsyncExitStack
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    retired: bool = False


class _ListenKeeper:
    """The 2026-07-28 `subscriptions/listen` stream naming one session's followed URIs.

    One task (`run`, beside the session) opens and closes the streams; `apply` asks it for a
    stream naming exactly some URIs. Updates are not read here: the SDK hands every stream
    event to the session's message handler too, so this only drains the stream.
    """

    def __init__(self, node: str, client: Client, timeout: float, log: logging.Logger) -> None:
        self._node = node
        self._client = client
        self._timeout = timeout
        self._log = log
        self._send, self._receive = anyio.create_memory_object_stream[_Change](math.inf)
        self._current: _Stream | None = None

    async def apply(self, uris: frozenset[str]) -> frozenset[str]:
        """Have a stream naming exactly `uris` acknowledged (none: no stream); the URIs the
        server took. Raises `ServerUnavailable` (or the server's `MCPError`)."""
        change = _Change(uris)
        try:
            self._send.send_nowait(change)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            raise self._ended() from exc
        await change.done.wait()
        if change.error is not None:
            raise change.error
        return change.honored

    async def run(self) -> None:
        """Serve `apply` until cancelled (when the session ends)."""
        change: _Change | None = None
        try:
            async with anyio.create_task_group() as tg:
                async for change in self._receive:
                    await self._switch(change, tg)
        finally:
            self._send.close()
            pending = [change] if change is not None else []
            with suppress(anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                while True:
                    pending.append(self._receive.receive_nowait())
            for waiting in pending:
                if not waiting.done.is_set():
                    waiting.settle(error=self._ended())
            self._receive.close()
            if self._current is not None:
                with anyio.CancelScope(shield=True):
                    await self._close(self._current)

    async def _switch(self, change: _Change, tg: anyio.abc.TaskGroup) -> None:
        if change.reopen is not None and change.reopen is not self._current:
            change.settle()  # replaced meanwhile
            return
        fresh: _Stream | None = None
        error: ToolkitError | MCPError | None = None
        if change.uris:
            try:
                fresh = await self._open(change.uris, tg)
            except MCPError as exc:
                error = exc
            except Exception as exc:  # lost before the ack, timed out: fail the change, not us
                error = ServerUnavailable(
                    f"MCP server {self._node!r} did not take the subscription stream: "
                    f"{describe_error(exc)}",
                    node=self._node,
                )
        if error is not None:
            if change.reopen is not None:
                self._log.warning("could not listen again: %s", describe_error(error))
                tg.start_soon(self._reopen_later, change.reopen)
            change.settle(error=error)
            return
        old, self._current = self._current, fresh
        if old is not None:
            await self._close(old)
        change.settle(fresh.honored if fresh is not None else frozenset())

    async def _open(self, uris: frozenset[str], tg: anyio.abc.TaskGroup) -> _Stream:
        exits = AsyncExitStack()
        with anyio.fail_after(self._timeout):
            subscription = await exits.enter_async_context(
                self._client.listen(resource_subscriptions=sorted(uris))
            )
        honored = frozenset(subscription.honored.resource_subscriptions or ())
        stream = _Stream(uris, honored, exits)
        tg.start_soon(self._drain, stream, subscription)
        return stream

    async def _close(self, stream: _Stream) -> None:
        stream.retired = True
        stream.scope.cancel()
        await stream.exits.aclose()

    async def _drain(self, stream: _Stream, subscription: Subscription) -> None:
        with stream.scope:
            why = "the server closed it"
            try:
                async for _event in subscription:
                    pass  # the session's message handler has it (see the class docstring)
            except SubscriptionLost as exc:
                why = str(exc)
            if not stream.retired:
                self._log.info("resource subscription stream ended (%s); listening again", why)
                await self._reopen_later(stream)

    async def _reopen_later(self, stream: _Stream) -> None:
        await anyio.sleep(_RELISTEN_DELAY)  # a server that keeps closing it is not hammered
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._send.send_nowait(_Change(stream.uris, reopen=stream))

    def _ended(self) -> ServerUnavailable:
        return ServerUnavailable(
            f"MCP server {self._node!r}: the session ended; reconnecting", node=self._node
        )
