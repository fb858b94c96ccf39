"""The log level a node's clients asked of its server.

A handshake-era server sends log messages from the level set with `logging/setLevel` up, and
until one is set from a level of its own choosing (the spec lets it): the node's clients may
want more than that default. The node's owner sets the level (`set`): it is sent on the live
session, and again on each new one (a restarted server forgets it). Only to servers that
declare `logging` (another would answer -32601). A 2026-07-28 server has no `setLevel`: each of
the node's requests opts in to every level (`session.py`), as the SDK's servers send them.
"""

from __future__ import annotations

import logging

import anyio
import mcp_types
from mcp import Client
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .error_text import describe_error
from .session import OwnedSession

__all__ = ["ServerLogLevel"]


class ServerLogLevel:
    """The level last set for one node's server, sent on each of its sessions."""

    def __init__(self, session: OwnedSession, *, timeout: float, log: logging.Logger) -> None:
        self._session = session
        self._timeout = timeout
        self._log = log
        self._level: mcp_types.LoggingLevel | None = None

    async def set(self, level: mcp_types.LoggingLevel) -> None:
        """Ask the server for log messages from `level` up, now if connected and on every
        session to come. Never raises: a server that refuses it keeps its own level."""
        self._level = level
        conn = self._session.live
        if conn is not None and conn.client is not None:
            await self._send(conn.client, level)

    async def serve(self, client: Client) -> None:
        """A new session on `client`: the level set before, if one was."""
        if self._level is not None:
            await self._send(client, self._level)

    async def _send(self, client: Client, level: mcp_types.LoggingLevel) -> None:
        capabilities = client.server_capabilities
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS or capabilities.logging is None:
            return
        with anyio.move_on_after(self._timeout) as waited:
            try:
                # The request itself: the SDK's method warns that 2026-07-28 retired it.
                request = mcp_types.SetLevelRequest(
                    params=mcp_types.SetLevelRequestParams(level=level)
                )
                await client.session.send_request(request, mcp_types.EmptyResult)
            except Exception as exc:  # the server's to refuse: its own level stays
                self._log.warning(
                    "the server refused logging/setLevel %s: %s", level, describe_error(exc)
                )
        if waited.cancelled_caught:
            self._log.warning(
                "the server did not answer logging/setLevel %s within %g s", level, self._timeout
            )
