"""Proxied tool calls of a stdio client, passed straight through.

What `pass_through` does over HTTP, for the one client a gateway serves over stdio (Claude
Desktop, IDEs, any client that launches us): a `tools/call` request of an exposed MCP server's
tool goes on the node's connection as raw JSON-RPC (`Passing`), and the server's progress, log
messages, questions and result come back as lines among the SDK's, shaped as the SDK shapes
them for this client. As the SDK does, the client's first request decides the connection's era
(it goes to the SDK, which decides the same way):
- a 2025-era session: the SDK's connection is noted when its `initialize` is answered
  (`HandshakeSessions.unnamed`), for its protocol version, the capabilities its client declared
  and its share of the nodes; a server's question goes to the client under an id of ours, and
  its answer is taken here before the SDK could see it (`session_questions`);
- a 2026-07-28 connection: each call carries its own envelope, judged as the SDK's ladder
  judges it; the run's one client has one share of the nodes (`ClientQuotas.sole`); a client
  that can be asked is asked in input-required rounds, while a serving run parks requests
  (`pass_through_rounds`), else its calls take the usual path.
Either way the client's `notifications/cancelled` cancels a call, which is then never
answered, as the SDK never answers a request its client cancelled over stdio.

Everything else goes to the SDK: other requests, calls before the era is known (or the
handshake answered), and any call `Passing` does not take.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, cast

import anyio
from mcp_types import PROTOCOL_VERSION_META_KEY

from toolkits import json_bytes

from ..serving import ServingNow
from .handshake_sessions import HandshakeSessions, OpenSession, Stopped
from .passing import PassedCall, Passing

__all__ = ["StdioPassThrough"]

if TYPE_CHECKING:  # the transport imports the server, which imports this
    from ..transports.stdio import WriteLine

JsonObject = dict[str, Any]


class StdioPassThrough:
    """The stdio transport's `Shortcut` for calls passed through (see the module docstring)."""

    def __init__(self, passing: Passing, sessions: HandshakeSessions, now: ServingNow) -> None:
        self.passing = passing
        self._sessions = sessions
        self._now = now
        self._modern: bool | None = None
        """The connection's era, once its first request said it."""
        self._session: OpenSession | None = None
        self._enveloped: dict[object, anyio.CancelScope] = {}
        """The 2026-07-28 calls passed through now, by request id (a session holds its own)."""

    def _opened(self, session: OpenSession) -> None:
        self._session = session

    def take(self, message: JsonObject, write: WriteLine) -> Awaitable[bool] | None:
        if self._sessions.unnamed is None:  # serving over stdio: its connection is ours to note
            self._sessions.unnamed = self._opened
        method = message.get("method")
        if method is None:  # a response: to a question of ours, or to the SDK's own request
            questions = self._session.questions if self._session is not None else None
            if questions is not None and questions.answered(message):
                return _done()
            return None
        params = message.get("params")
        if "id" not in message:
            if method == "notifications/cancelled" and isinstance(params, dict):
                self._cancelled(cast(JsonObject, params).get("requestId"))
            return None  # the SDK hears it all the same
        if self._modern is None:  # the SDK's to serve: it decides the era by it, so do we
            meta = cast(JsonObject, params).get("_meta") if isinstance(params, dict) else None
            self._modern = method != "initialize" and (
                isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta
            )
            return None
        if method != "tools/call" or not isinstance(params, dict):
            return None
        if self._modern:
            params = cast(JsonObject, params)
            if "inputResponses" in params or "requestState" in params:
                return None  # a round to resume: the usual path's
            call = self.passing.enveloped(message, params)
        else:
            session = self._session
            call = self.passing.in_session(session, message) if session is not None else None
        return None if call is None else self._answer(call, write)

    async def _answer(self, call: PassedCall, write: WriteLine) -> bool:
        passing = self.passing
        if passing.new_scope is anyio.CancelScope:
            # The backend's own class: `anyio.CancelScope()` asks which library runs, then
            # builds the scope twice.
            passing.new_scope = type(anyio.CancelScope())
        scope = passing.new_scope()
        reply = _Lines(write, call.request_id)
        if call.session is not None:
            return await passing.answer(call, reply, scope)
        serving = self._now.current
        quota = serving.quotas.sole(passing.gateway) if serving is not None else None
        self._enveloped[call.request_id] = scope
        try:
            return await passing.answer(call, reply, scope, quota)
        finally:
            if self._enveloped.get(call.request_id) is scope:  # an id reused meanwhile is not
                del self._enveloped[call.request_id]

    def _cancelled(self, request_id: object) -> None:
        if self._session is not None:
            self._session.stop(request_id, "cancelled")
        scope = self._enveloped.get(request_id)
        if scope is not None:
            scope.cancel()


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
