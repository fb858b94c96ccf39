"""A `tools/list` over HTTP answered again from the last answer while the tools are the same.

A gateway in front of many servers lists a thousand tools; the SDK shapes, checks and writes
each one per request (a warm `tools/list` of 1,000 tools cost ~60 ms of the gateway's time,
most of it in the SDK's result serialisation). Listing the tools again is cheap (the nodes keep
their listings), so each request lists them and, when they equal those of the last answer to a
request with the same envelope, gets that answer's bytes with its own id. Anything else (a
cursor, a change in the tools) goes to the SDK, whose answer is kept.

The envelope is a 2026-07-28 request's `_meta`, or a 2025-era session's protocol version (on a
live, initialized session: `handshake_sessions`; the SDK answers every session of a version
alike and on its own dispatch, the whole of a session's first-page listing cost a cycle of
open, list and close ~1 ms). Answers are JSON (the SDK's event stream of one message is made
JSON by `json_answers`, the layer inside this one); a session's carries the session's id.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...trace import TRACE_CONTEXT_KEYS
from ..transports.envelope import buffered_body, is_modern_post, posted_object
from .handshake_sessions import HandshakeSessions, OpenSession, answered_as_json
from .modern_headers import sdk_takes

__all__ = ["ToolListCache", "listing_prefix", "modern_listing", "session_listing"]

_MAX_ENTRIES = 64
"""Envelopes (client name, version, capabilities) whose answers are kept."""


@dataclass(frozen=True, slots=True)
class _Answer:
    tools: list[types.Tool]
    result: bytes
    """The answer's `result`, as the SDK wrote it."""
    headers: list[tuple[bytes, bytes]]


class ToolListCache:
    """ASGI: see the module docstring. `list_tools` lists the served tools (no I/O)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        list_tools: Callable[[], Awaitable[list[types.Tool]]],
        sessions: HandshakeSessions | None = None,
    ) -> None:
        self.app = app
        self._list_tools = list_tools
        self._sessions = sessions
        self._answers: dict[str, _Answer] = {}
        self.reused = 0
        """Requests answered from a kept answer (for tests and the curious)."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if is_modern_post(scope):
            return self._serve(scope, receive, send, None)
        if self._sessions is not None and scope["type"] == "http" and scope["method"] == "POST":
            session = self._sessions.find(scope)
            if session is not None:
                return self._serve(scope, receive, send, session)
        return self.app(scope, receive, send)  # no frame here while a stream is open

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, session: OpenSession | None
    ) -> None:
        body, replay = await buffered_body(receive)
        fields = posted_object(scope, body) if body is not None else None
        request = modern_listing(fields) if session is None else _session_listing(scope, fields)
        if request is not None and session is None and not sdk_takes(scope, fields or {}):
            request = None  # the SDK refuses it (a wrong Mcp-Method, Accept, ...): it says why
        if request is None:
            await self.app(scope, replay, send)
            return
        request_id = request[0]
        key = request[1] if session is None else f"session {session.protocol_version}"
        tools = await self._list_tools()
        kept = self._answers.get(key)
        if kept is not None and kept.tools == tools:
            self.reused += 1
            if session is not None:
                kept = _Answer(kept.tools, kept.result, _json_in(session))
            await _answer(send, kept, request_id)
            return
        captured = _Captured(send)
        await self.app(scope, replay, captured)
        answer = captured.answer(request_id, tools)
        if answer is not None:
            if len(self._answers) >= _MAX_ENTRIES:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = answer


def modern_listing(fields: dict[str, Any] | None) -> tuple[types.RequestId, str] | None:
    """The id of a first-page `tools/list` request and the key of its envelope (its `_meta`
    but a W3C trace context), or None."""
    if fields is None or fields.get("method") != "tools/list":
        return None
    params = fields.get("params")
    request_id = fields.get("id")
    if not isinstance(params, dict) or set(cast(dict[str, Any], params)) != {"_meta"}:
        return None  # a cursor, or something the SDK must judge
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    meta: Any = cast(dict[str, Any], params)["_meta"]
    if isinstance(meta, dict):
        fields = cast(dict[str, Any], meta)
        if any(key in fields for key in TRACE_CONTEXT_KEYS):
            # New with each request of an instrumented client, and nothing in the answer
            # depends on it: keyed on it, each such listing missed (5,480 tools: 2-3 s).
            meta = {k: v for k, v in fields.items() if k not in TRACE_CONTEXT_KEYS}
    return request_id, json.dumps(meta, sort_keys=True)


def session_listing(fields: dict[str, Any] | None) -> types.RequestId | None:
    """The id of a first-page `tools/list` request on a 2025-era session (which the SDK
    answers as it answers any such request of the session's version), or None."""
    if fields is None or fields.get("method") != "tools/list":
        return None
    params = fields.get("params", {})
    request_id = fields.get("id")
    if not isinstance(params, dict) or not set(cast(dict[str, Any], params)) <= {"_meta"}:
        return None  # a cursor, or something the SDK must judge
    meta = cast(dict[str, Any], params).get("_meta", {})
    if not isinstance(meta, dict) or any(
        str(key).startswith("io.modelcontextprotocol/") for key in cast(dict[str, Any], meta)
    ):
        return None  # a 2026-07-28 envelope on a session: the SDK's to judge
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    return request_id


def _session_listing(
    scope: Scope, fields: dict[str, Any] | None
) -> tuple[types.RequestId, str] | None:
    """`session_listing` of a POST the SDK takes (JSON, accepting both answers' types)."""
    request_id = session_listing(fields)
    if request_id is None or not answered_as_json(scope):
        return None
    return request_id, ""


def _json_in(session: OpenSession) -> list[tuple[bytes, bytes]]:
    assert session.id is not None  # sessions over HTTP have one
    return [(b"content-type", b"application/json"), (b"mcp-session-id", session.id.encode())]


def listing_prefix(request_id: types.RequestId) -> bytes:
    """How the SDK's answer to `request_id` begins, up to its `result` (compact JSON)."""
    return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'


async def _answer(send: Send, kept: _Answer, request_id: types.RequestId) -> None:
    body = listing_prefix(request_id) + kept.result + b"}"
    headers = [*kept.headers, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class _Captured:
    """Passes the SDK's answer on, and keeps it if it is one whole JSON body."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._status = 0
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._whole = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self._status = message["status"]
            self._headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            self._body.append(message.get("body", b""))
            self._whole = not message.get("more_body", False) and len(self._body) == 1
        await self._send(message)

    def answer(self, request_id: types.RequestId, tools: list[types.Tool]) -> _Answer | None:
        """The answer to keep: one whole JSON body."""
        is_json = (b"content-type", b"application/json") in self._headers
        if self._status != 200 or not is_json or not self._whole:
            return None
        body = self._body[0]
        prefix = listing_prefix(request_id)
        if not (body.startswith(prefix) and body.endswith(b"}")):
            return None
        headers = [(k, v) for k, v in self._headers if k != b"content-length"]
        return _Answer(tools, body[len(prefix) : -1], headers)
