"""What a stdio client's requests skip the SDK's server for: proxied tool calls passed
straight through, and a warm `tools/list` answered again.

What `pass_through` and `tool_list_cache` do over HTTP, for the one client a gateway serves
over stdio (Claude Desktop, IDEs, any client that launches us). As the SDK does, the client's
first request decides the connection's era (it goes to the SDK, which decides the same way):
- a 2025-era session: the SDK's connection is noted when its `initialize` is answered
  (`HandshakeSessions.unnamed`), for its protocol version, the capabilities its client declared
  and its share of the nodes; a server's question goes to the client under an id of ours, and
  its answer is taken here before the SDK could see it (`session_questions`);
- a 2026-07-28 connection: each request carries its own envelope, a call's judged as the SDK's
  ladder judges it; the run's one client has one share of the nodes (`ClientQuotas.sole`); a
  client that can be asked is asked in input-required rounds, while a serving run parks
  requests (`pass_through_rounds`), else its calls take the usual path.

A `tools/call` of an exposed MCP server's tool (with `[gateway] pass_through`, the default)
goes on the node's connection as raw JSON-RPC (`Passing`), and the server's progress, log
messages, questions and result come back as lines among the SDK's, shaped as the SDK shapes
them for this client. The client's `notifications/cancelled` cancels such a call, which is
then never answered, as the SDK never answers a request its client cancelled over stdio.

A first-page `tools/list` is answered with the SDK's last answer to one of the same envelope
(a session's protocol version, a 2026-07-28 request's `_meta`), its id replaced, while the
served tools are the very same (listing them again is cheap: the nodes keep their listings);
else the SDK answers, and its answer, as written, is kept (`answered`). A warm listing of a
thousand tools is the SDK's ~10 ms of shaping and checking each one, every time.

Everything else goes to the SDK: other requests, requests before the era is known (or the
handshake answered), and any call `Passing` does not take.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import anyio
import mcp_types as types
from mcp_types import PROTOCOL_VERSION_META_KEY

from toolkits import json_bytes

from ..serving import ServingNow
from .handshake_sessions import HandshakeSessions, OpenSession, Stopped
from .passing import PassedCall, Passing
from .tool_list_cache import listing_prefix, modern_listing, session_listing

__all__ = ["StdioShortcut"]

if TYPE_CHECKING:  # the transport imports the server, which imports this
    from ..transports.stdio import WriteLine

JsonObject = dict[str, Any]


_MAX_LISTINGS = 16
"""Envelopes whose listings are kept (one client: one, unless it changes its capabilities)."""


class StdioShortcut:
    """The stdio transport's `Shortcut` (see the module docstring). `list_tools` lists the
    served tools (no I/O); `passing`: calls passed through, if on."""

    def __init__(
        self,
        sessions: HandshakeSessions,
        now: ServingNow,
        list_tools: Callable[[], Awaitable[list[types.Tool]]],
        passing: Passing | None = None,
    ) -> None:
        self.passing = passing
        self._sessions = sessions
        self._now = now
        self._list_tools = list_tools
        self._listings: dict[str, tuple[list[types.Tool], bytes]] = {}
        """The last answer's `result` per envelope, and the tools it lists."""
        self._listing: dict[object, tuple[str, list[types.Tool]]] = {}
        """The listings the SDK answers now, by request id: their envelope and tools."""
        self.reused = 0
        """Listings answered again (for tests and the curious)."""
        self._modern: bool | None = None
        """The connection's era, once its first request said it."""
        self._session: OpenSession | None = None
        self._enveloped: dict[object, anyio.CancelScope] = {}
        """The 2026-07-28 calls passed through now, by request id (a session holds its own)."""
        self._input_ended: types.ErrorData | None = None

    def _opened(self, session: OpenSession) -> None:
        self._session = session
        if self._input_ended is not None:  # its `initialize` was the last line read
            session.client_gone(self._input_ended)

    def input_ended(self, answer: types.ErrorData) -> None:
        """The client closed stdin: the servers' questions to it get `answer`."""
        self._input_ended = answer
        if self._session is not None:
            self._session.client_gone(answer)

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
        if method == "tools/list":
            return self._listed(message, write)
        if method != "tools/call" or self.passing is None or not isinstance(params, dict):
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

    def answered(self, request_id: object, line: bytes) -> None:
        """The SDK answered `request_id` with `line`, as written: a listing's is kept."""
        listing = self._listing.pop(request_id, None)
        if listing is None:
            return
        prefix = listing_prefix(cast(types.RequestId, request_id))
        if line.startswith(prefix) and line.endswith(b"}"):  # a result, not an error
            if len(self._listings) >= _MAX_LISTINGS:
                self._listings.pop(next(iter(self._listings)))
            key, tools = listing
            self._listings[key] = (tools, line[len(prefix) : -1])

    def _listed(self, message: JsonObject, write: WriteLine) -> Awaitable[bool] | None:
        if self._modern:
            found = modern_listing(message)
            if found is None:
                return None
            request_id, key = found
        else:
            session = self._session
            if session is None or session.connection.client_capabilities is None:
                return None
            request_id = session_listing(message)
            if request_id is None:
                return None
            key = f"session {session.protocol_version}"
        return self._list(request_id, key, write)

    async def _list(self, request_id: types.RequestId, key: str, write: WriteLine) -> bool:
        tools = await self._list_tools()
        kept = self._listings.get(key)
        if kept is not None and kept[0] == tools:
            self.reused += 1
            await write(listing_prefix(request_id) + kept[1] + b"}")
            return True
        self._listing[request_id] = (key, tools)
        return False  # the SDK answers: `answered` keeps its answer

    async def _answer(self, call: PassedCall, write: WriteLine) -> bool:
        passing = self.passing
        assert passing is not None  # `take` passes calls through only then
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

    async def error(self, error: JsonObject) -> None:
        await self.message({"jsonrpc": "2.0", "id": self._id, "error": error})

    async def stopped(self, why: Stopped) -> None:
        """Nothing to write: over stdio the SDK never answers a request its client cancelled,
        and a session that ended has nobody to read."""

    def awaiting_client(self) -> AbstractContextManager[bool]:
        """A wait on the client's answer: a client that goes closes stdin, whose end answers
        every question of the connection (`input_ended`)."""
        return nullcontext(True)
