"""One session's lifetime with a server (`Connection`), and how a request tells its loss.

A `Connection` is made by the node's `OwnedSession` for each session and ended from any task
(`drop`): the owner then reconnects. A request that sees its connection close turns that into
`ConnectionLost` (`connection_lost`, `lost_during`), or `NodeStopped` when the owner closed it.

A server that no longer knows the session (it restarted, or ended the session: it answers a
request carrying the session's id with `http_refusal.FORGOTTEN`, as `lean_transport` and
`forward_http` see) read nothing sent on it since: the connection is `expired`, and the
requests it refused may go again on the next session (`OwnedSession.on_live`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import TypeVar

import anyio
import anyio.abc
import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ..errors import RECONNECTING, ConnectionLost, NodeStopped
from .sdk_errors import closed_by_sdk
from .server_requests import Stamp
from .stdio_pipe import StdioLink
from .task_statuses import TaskStatuses
from .transport import HttpLink

__all__ = ["Connection", "connection_lost", "lost_during"]

_SHUT_DOWN = "the toolkit is shutting down"

_T = TypeVar("_T")


class Connection:
    """One session's lifetime: the client, the scope that ends it, and its refresh queue."""

    def __init__(self) -> None:
        self.scope = anyio.CancelScope()
        self.client: Client | None = None
        self.lost: str | None = None
        self.expired: int | None = None
        """The HTTP status with which the server said it no longer knows the session
        (`forgotten`), if it did."""
        self.http: HttpLink | None = None
        """A streamable HTTP connection's requests, for calls that pass it through."""
        self.stdio: StdioLink | None = None
        """A stdio connection's pipe, for calls that pass it through."""
        self.stamp_passed_through: Stamp | None = None
        """A 2026-07-28 connection's stamp for requests passed through (`declare_per_call`)."""
        self.refresh_send, self.refresh_receive = anyio.create_memory_object_stream[None](1)
        self.tasks = TaskStatuses()
        """Where the `notifications/tasks/status` read on it go (`task_calls`)."""
        self.background: anyio.abc.TaskGroup | None = None
        """The session's own tasks (`abandonable`), ended with it."""

    async def abandonable(self, request: Callable[[], Awaitable[_T]]) -> _T:
        """`request()`'s outcome, the request run in the session's own task: a caller that
        stops waiting (its clock ran out, or it was cancelled) goes at once. The SDK then
        tells the server (`notifications/cancelled`), in that task: on a transport whose
        writes are blocked (a server that stopped reading) that took up to 5 s more each."""
        background = self.background
        if background is None:  # not serving yet
            return await request()
        done = anyio.Event()
        outcome: list[_T] = []
        failure: list[Exception] = []
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                try:
                    outcome.append(await request())
                except Exception as exc:  # the caller's to raise
                    failure.append(exc)
                finally:
                    done.set()

        background.start_soon(run)  # in the caller's context (its call in flight, say)
        try:
            await done.wait()
        except anyio.get_cancelled_exc_class():
            scope.cancel()
            raise
        if failure:
            raise failure[0]
        if not outcome:  # the session ended under it
            raise MCPError(mcp_types.CONNECTION_CLOSED, "Connection closed")
        return outcome[0]

    def drop(self, reason: str) -> None:
        """End this session from any task (the owner then reconnects)."""
        if self.lost is None:
            self.lost = reason
        self.scope.cancel()

    def closed_by_server(self) -> None:
        """The server closed the connection (its read stream ended): end it, saying how a stdio
        server ended when that is known (its status is noted before its stdout's end reaches
        the session), so a crash, idle or mid-call, reads as one."""
        ended = self.stdio.how_it_ended() if self.stdio is not None else ""
        self.drop(f"the server closed the connection{ended}")

    def forgotten(self, status: int) -> None:
        """The server answered a request on this session with HTTP `status`, saying it no longer
        knows the session (`http_refusal.FORGOTTEN`): end it, as `expired`."""
        if self.lost is None:  # not if it ended otherwise first
            self.expired = status
        self.drop(f"the server no longer knows the session (HTTP {status})")

    def shutting_down(self) -> None:
        """Its owner is being stopped: calls it cuts off say so, not that the server went."""
        if self.lost is None:
            self.lost = _SHUT_DOWN

    def request_refresh(self) -> None:
        # One pending request is enough: the refresh that serves it lists everything.
        with suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.refresh_send.send_nowait(None)

    def close(self) -> None:
        self.refresh_send.close()
        self.refresh_receive.close()


def connection_lost(node: str, conn: Connection, what: str) -> ConnectionLost:
    """End `conn` (its owner reconnects) and say so, for a request that saw it close."""
    if conn.lost == _SHUT_DOWN:  # closed by its owner: nobody reconnects
        return NodeStopped(f"MCP server {node!r} was disconnected: {what}; {_SHUT_DOWN}", node=node)
    if conn.expired is not None:
        said = f"no longer knows the session (HTTP {conn.expired})"
        return ConnectionLost(f"MCP server {node!r} {said}: {what}{RECONNECTING}", node=node)
    ended = conn.stdio.how_it_ended() if conn.stdio is not None else ""
    conn.drop(f"{what} (server gone{ended})")
    return ConnectionLost(f"MCP server {node!r} went away: {what}{ended}{RECONNECTING}", node=node)


def lost_during(node: str, conn: Connection, exc: MCPError, what: str) -> ConnectionLost | None:
    """`connection_lost` if `exc`, the answer to a request, means the connection closed during
    `what`; None for the server's own error answer (relayed as it is)."""
    if closed_by_sdk(exc) or conn.lost is not None:
        return connection_lost(node, conn, f"the connection closed during {what}")
    return None
