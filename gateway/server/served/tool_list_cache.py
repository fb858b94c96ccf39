"""A 2026-07-28 `tools/list` over HTTP answered again from the last answer while the tools are
the same.

A gateway in front of many servers lists a thousand tools; the SDK shapes, checks and writes
each one per request (a warm `tools/list` of 1,000 tools cost ~60 ms of the gateway's time,
most of it in the SDK's result serialisation). Listing the tools again is cheap (the nodes keep
their listings), so each request lists them and, when they equal those of the last answer to a
request with the same envelope, gets that answer's bytes with its own id. Anything else (a
cursor, a 2025-era request, a change in the tools) goes to the SDK, whose answer is kept.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..transports.envelope import buffered_body, is_modern_post, posted_object

__all__ = ["ToolListCache"]

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
        self, app: ASGIApp, *, list_tools: Callable[[], Awaitable[list[types.Tool]]]
    ) -> None:
        self.app = app
        self._list_tools = list_tools
        self._answers: dict[str, _Answer] = {}
        self.reused = 0
        """Requests answered from a kept answer (for tests and the curious)."""

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if not is_modern_post(scope):
            return self.app(scope, receive, send)  # no frame here while a stream is open
        return self._serve(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, replay = await buffered_body(receive)
        request = _listing_request(posted_object(scope, body)) if body is not None else None
        if request is None:
            await self.app(scope, replay, send)
            return
        request_id, key = request
        tools = await self._list_tools()
        kept = self._answers.get(key)
        if kept is not None and kept.tools == tools:
            self.reused += 1
            await _answer(send, kept, request_id)
            return
        captured = _Captured(send)
        await self.app(scope, replay, captured)
        answer = captured.answer(request_id, tools)
        if answer is not None:
            if len(self._answers) >= _MAX_ENTRIES:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = answer


def _listing_request(fields: dict[str, Any] | None) -> tuple[types.RequestId, str] | None:
    """The id of a first-page `tools/list` request and the key of its envelope, or None."""
    if fields is None or fields.get("method") != "tools/list":
        return None
    params = fields.get("params")
    request_id = fields.get("id")
    if not isinstance(params, dict) or set(cast(dict[str, Any], params)) != {"_meta"}:
        return None  # a cursor, or something the SDK must judge
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        return None
    return request_id, json.dumps(params, sort_keys=True)


def _prefix(request_id: types.RequestId) -> bytes:
    return b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode() + b',"result":'


async def _answer(send: Send, kept: _Answer, request_id: types.RequestId) -> None:
    body = _prefix(request_id) + kept.result + b"}"
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
        json_body = (b"content-type", b"application/json") in self._headers
        if self._status != 200 or not self._whole or not json_body:
            return None
        body, prefix = self._body[0], _prefix(request_id)
        if not (body.startswith(prefix) and body.endswith(b"}")):
            return None
        headers = [(k, v) for k, v in self._headers if k != b"content-length"]
        return _Answer(tools, body[len(prefix) : -1], headers)
