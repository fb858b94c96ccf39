"""The `Forward`s of one node: how each of its tools is called raw on the live connection.

A node's calls, and the calls a gateway passes through to it, go as raw JSON-RPC on the
connection its session keeps (`forward`). Making a `Forward` reads the connection's channel
(the stdio pipe, or the HTTP session or 2026-07-28 stamp), so each is kept by name with what
it was made of, and made again only when that changes: a new connection, session, protocol,
lean client or listing. Making one was ~4 % of a passed-through call's CPU.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import mcp_types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from .config import McpServerConfig
from .connection import Connection
from .forward import Channel, Forward
from .forward_http import HttpChannel
from .server_requests import CallsInFlight
from .session import OwnedSession
from .stdio_pipe import StampedPipe
from .transport import HttpLink

__all__ = ["Forwards"]


class Forwards:
    """A node's `Forward`s on its live connection, kept while what they were made of holds."""

    def __init__(
        self,
        node: str,
        config: McpServerConfig,
        session: OwnedSession,
        calls: CallsInFlight,
    ) -> None:
        self._node = node
        self._config = config
        self._session = session
        self._calls = calls
        self._made: dict[str, tuple[tuple[object, ...], Forward]] = {}
        """By name, on the connection `_on`: each with what it was made of."""
        self._on: Connection | None = None

    def get(self, name: str, original: str, conn: Connection) -> Forward | None:
        """The `Forward` of the tool the caller knows as `name` (the server's `original`) on
        `conn`, a live connection; None when that connection cannot carry it."""
        if conn is not self._on:  # forget the last connection's
            self._made, self._on = {}, conn
        client = conn.client
        assert client is not None
        link = conn.http
        made_of = (
            (
                original,
                client,
                link.client,
                link.lean(),
                link.session_id,
                link.protocol_version,
            )
            if link is not None
            else (original, client, client.protocol_version)
        )
        kept = self._made.get(name)
        if kept is not None and kept[0] == made_of:
            return kept[1]
        forward = self._make(name, original, conn)
        if forward is None:
            self._made.pop(name, None)
        else:
            self._made[name] = (made_of, forward)
        return forward

    def _make(self, name: str, original: str, conn: Connection) -> Forward | None:
        assert conn.client is not None
        channel: Channel | None = None
        calls: CallsInFlight | None = None
        if conn.stdio is not None:
            channel = pipe = conn.stdio.pipe
            if pipe is not None and conn.client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                stamp = conn.stamp_passed_through
                channel = StampedPipe(pipe, stamp) if stamp is not None else None
            calls = self._calls  # the pipe does not say which call the server's requests are for
        elif conn.http is not None:
            channel = self._http_channel(conn, conn.http)
            # A session may ask on its own stream, out of the call's response; a 2026-07-28
            # connection's stamp looks there for what the caller answers.
            calls = self._calls
        if channel is None:
            return None
        timeout, cap = self._config.clock_of(original)  # once per tool: `Forward`s are kept
        return Forward(
            node=self._node,
            tool=name,
            original=original,
            conn=conn,
            channel=channel,
            timeout=timeout,
            cap=cap,
            on_notification=partial(self._session.on_raw_notification, conn),
            note_log=self._note_log,
            calls=calls,
            # A handshake-era session may ask and log on its own stream, where nothing says
            # which call it is about: there every call counts (`server_requests`).
            says_which_call=isinstance(channel, HttpChannel) and channel.stamp is not None,
            probe=isinstance(channel, HttpChannel),
        )

    def _note_log(self, fields: dict[str, Any]) -> None:
        try:
            params = mcp_types.LoggingMessageNotificationParams.model_validate(fields)
        except ValidationError:
            return  # not a log message the SDK session would write either
        self._session.note_server_log(params)

    def _http_channel(self, conn: Connection, link: HttpLink) -> HttpChannel | None:
        version = link.protocol_version
        if link.client is None or conn.client is None or version is None:
            return None
        # 2026-07-28: the envelope and headers the SDK session gives each request of its own
        # (client info, capabilities, log level, `Mcp-Param-*` of the tool), declaring of the
        # asking capabilities only what the call's caller answers.
        modern = version in MODERN_PROTOCOL_VERSIONS
        stamp = conn.stamp_passed_through if modern else None
        if (stamp if modern else link.session_id) is None:
            return None
        return HttpChannel(
            node=self._node,
            conn=conn,
            link=link,
            client=link.client,
            lean=link.lean(),
            session_id=link.session_id,
            protocol_version=version,
            max_event_bytes=self._config.max_message_bytes,
            stamp=stamp,
        )
