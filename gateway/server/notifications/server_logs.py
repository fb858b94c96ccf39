"""A downstream server's log messages sent outside any call, for our 2025-era clients.

A server may log while no call is in flight (a watcher, a timer; the 2025-11-25 spec lets a
server send `notifications/message` on its standalone stream). Such a message belongs to no
request, so it goes to every handshake-era client of the serving run that has a standalone
channel (the stdio pipe; an HTTP session's GET stream) and came without a token (clients with
tokens may be different people: the gateway's own log has the message), and takes its level
(`log_messages.log_levels`), its `logger` naming the node (`<node>` or `<node>/<logger>`) so
the client knows which server said it. 2026-07-28 clients have no channel outside requests,
and hear none.

The node hands each message over without waiting (its session waits on it): messages queue
here, and one task of the serving run sends them; past `BACKLOG` waiting, new ones are dropped
with a warning.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import suppress

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.connection import Connection

from toolkits import HasServerLogs

from .log_messages import NOTIFY_TIMEOUT, log_levels

__all__ = ["BACKLOG", "ServerLogRelay", "tagged"]

BACKLOG = 1000

log = logging.getLogger(__name__)

_Heard = tuple[str, types.LoggingMessageNotificationParams]


def tagged(node: str, params: types.LoggingMessageNotificationParams) -> dict[str, object]:
    """The message as our client gets it: its `logger` names the node first."""
    logger = f"{node}/{params.logger}" if params.logger else node
    return params.model_copy(update={"logger": logger}).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )


class ServerLogRelay:
    """The nodes' log messages outside calls, for the `connections` of one serving run (the
    handshake-era ones with a standalone channel, as the change relay keeps them)."""

    def __init__(self, connections: Callable[[], Collection[Connection]]) -> None:
        self._connections = connections
        self._send, self._receive = anyio.create_memory_object_stream[_Heard](BACKLOG)
        self._dropping = False

    def watch(self, nodes: Sequence[HasServerLogs]) -> Callable[[], None]:
        """Follow the nodes' messages; returns the function that stops following them."""
        undo = [node.subscribe_logs(self._heard) for node in nodes]

        def stop() -> None:
            for unsubscribe in undo:
                unsubscribe()

        return stop

    async def _heard(self, node: str, params: types.LoggingMessageNotificationParams) -> None:
        if not self._connections():
            log.debug("%s logged outside calls: no client to tell", node)
            return  # no queue to fill
        try:
            self._send.send_nowait((node, params))
            self._dropping = False
        except anyio.WouldBlock:
            if not self._dropping:  # once per run of drops: a flood must not flood our log
                log.warning("%d server log messages wait for the clients; dropping", BACKLOG)
            self._dropping = True
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass  # the serving run ended

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Send what the nodes said until closed or cancelled."""
        task_status.started()
        async with self._receive:
            async for node, params in self._receive:
                message: dict[str, object] | None = None
                for connection in list(self._connections()):
                    levels = log_levels(connection.protocol_version, None, connection)
                    if params.level not in levels:
                        continue
                    message = message or tagged(node, params)
                    with anyio.move_on_after(NOTIFY_TIMEOUT):
                        await connection.notify("notifications/message", message)

    def close(self) -> None:
        with suppress(anyio.ClosedResourceError):
            self._send.close()
