"""Proxied tool calls of a 2025-era stdio client, passed straight through.

What `pass_through` does for HTTP sessions, for the one session a gateway serves over stdio
(Claude Desktop, IDEs, any client that launches us): a `tools/call` request of an exposed MCP
server's tool goes on the node's session as raw JSON-RPC (`Passing`), and the server's
progress, log messages, questions and result come back as lines among the SDK's, shaped as the
SDK's session path shapes them. The session is the SDK's connection, noted when its
`initialize` is answered (`HandshakeSessions.unnamed`): its protocol version, the capabilities
its client declared, its share of the nodes. As on the session path, the client's
`notifications/cancelled` cancels a call, which is then never answered, and a server's question
is put to the client under an id of ours, whose answer is taken here before the SDK could see
it (`session_questions`).

Everything else goes to the SDK: the session's other requests, calls before the handshake is
done, calls of a 2026-07-28 connection (each request its own envelope), and any call
`Passing` does not take.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, cast

import anyio

from toolkits import json_bytes

from .handshake_sessions import HandshakeSessions, OpenSession, Stopped
from .passing import PassedCall, Passing

__all__ = ["StdioPassThrough"]

JsonObject = dict[str, Any]
WriteLine = Callable[[bytes], Awaitable[None]]
"""The transport's writer of one message (`transports.stdio.WriteLine`)."""


class StdioPassThrough:
    """The stdio transport's `Shortcut` for calls passed through (see the module docstring)."""

    def __init__(self, passing: Passing, sessions: HandshakeSessions) -> None:
        self.passing = passing
        self._session: OpenSession | None = None
        sessions.unnamed = self._opened

    def _opened(self, session: OpenSession) -> None:
        self._session = session
        # The backend's own scope class: `anyio.CancelScope()` asks which library runs, then
        # builds the scope twice.
        self.passing.new_scope = type(anyio.CancelScope())

    def take(self, message: JsonObject, write: WriteLine) -> Awaitable[bool] | None:
        session = self._session
        if session is None:
            return None
        method = message.get("method")
        if method is None:  # a response: to a question of ours, or to the SDK's own request
            questions = session.questions
            if questions is not None and questions.answered(message):
                return _done()
            return None
        if method == "notifications/cancelled":  # the SDK hears it all the same
            params = message.get("params")
            if isinstance(params, dict):
                session.stop(cast(JsonObject, params).get("requestId"), "cancelled")
            return None
        if "id" not in message:
            return None
        call = self.passing.in_session(session, message)
        return None if call is None else self._answer(call, write)

    async def _answer(self, call: PassedCall, write: WriteLine) -> bool:
        passing = self.passing
        return await passing.answer(call, _Lines(write, call.request_id), passing.new_scope())


async def _done() -> bool:
    return True


class _Lines:
    """The answer to one call, a line per message."""

    __slots__ = ("_id", "_write", "started")

    def __init__(self, write: WriteLine, request_id: object) -> None:
        self._write = write
        self._id = request_id
        self.started = False

    async def event(self, method: str, params: JsonObject) -> None:
        await self.message({"jsonrpc": "2.0", "method": method, "params": params})

    async def message(self, message: JsonObject) -> None:
        self.started = True
        await self._write(json_bytes(message))

    async def final(self, result: JsonObject) -> None:
        await self.message({"jsonrpc": "2.0", "id": self._id, "result": result})

    async def stopped(self, why: Stopped) -> None:
        """Nothing to write: over stdio the SDK never answers a request its client cancelled,
        and a session that ended has nobody to read."""
