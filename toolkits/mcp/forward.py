"""A tool call passed through: raw JSON-RPC over the session a node keeps to an HTTP server.

A gateway relaying a call it does not change needs none of the SDK client's per-request
machinery (memory streams, tasks, models for every message). `Forward.call` posts the request
on the node's live streamable HTTP session (its client, headers, auth and pooled connections,
its session id), reads the answer as it streams, and returns the result as the server sent it,
JSON, checked but not rebuilt. On the way, as `McpToolkit.call_tool` would: progress restarts
the clock and goes to the caller, log messages go to the caller, the server's own requests
are answered (refused for the reason the caller gives; pings answered), its other
notifications go to the node, a timeout or a cancelled caller cancels the request at the
server, and a connection lost mid-call is reported and reconnected.

`McpToolkit.forward(name)` offers one when the node's connection can carry it (a handshake-era
streamable HTTP session); `call` returns None when the request never reached the server (the
session was gone), so the caller can take the usual path with nothing done twice. Where the
link allows (`HttpLink.lean`), requests go out on the lean HTTP client (`lean_http`) instead
of httpx2's, which costs most of the CPU of a call passed through; a 401 or 403 it gets did
nothing at the server, so `call` returns None and the usual path runs the authorization flow.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, aclosing
from dataclasses import dataclass
from typing import Any, Protocol, cast

import anyio
import httpx2
import mcp_types
from pydantic import ValidationError

from ..base import error_result
from ..errors import ConnectionLost
from ..json_bytes import json_bytes
from .deadline import Deadline, timed_out
from .lean_http import LeanHttp
from .server_requests import refused
from .session import Connection, connection_lost
from .transport import HttpLink

__all__ = ["Forward", "Refuse"]

log = logging.getLogger(__name__)

Refuse = Callable[[dict[str, Any]], str]
"""Why the caller cannot answer this request of the server (it is refused with that)."""

JsonObject = dict[str, Any]

_ids = itertools.count(1)
_CANCEL_SECONDS = 2.0
"""How long telling the server that a call was cancelled may take."""


@dataclass(frozen=True, slots=True)
class Forward:
    """One tool of a node, callable as raw JSON-RPC on the node's live session."""

    node: str
    tool: str
    """The name the caller knows the tool by (in errors)."""
    original: str
    """The server's own name for it."""
    conn: Connection
    link: HttpLink
    client: httpx2.AsyncClient
    lean: LeanHttp | None
    """Sends the requests instead of `client` when set (`HttpLink.lean`)."""
    session_id: str
    protocol_version: str
    timeout: float
    cap: float
    max_event_bytes: int
    on_notification: Callable[[JsonObject], Awaitable[None]]
    check_result: Callable[[str, mcp_types.CallToolResult], Awaitable[None]]
    """The SDK client's check of a result against the tool's output schema (RuntimeError)."""

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        meta: Mapping[str, Any],
        on_progress: Callable[[float, float | None, str | None], Awaitable[None]],
        on_log: Callable[[JsonObject], Awaitable[None]],
        refuse: Refuse,
    ) -> JsonObject | None:
        """The `CallToolResult` as the server sent it (a protocol error as an error result);
        None if the request never reached the server. Raises `ConnectionLost`, `ToolTimeout`.
        """
        request_id = f"agent-gateway-{next(_ids)}"
        params = {
            "name": self.original,
            "arguments": dict(arguments),
            "_meta": {**meta, "progressToken": request_id},
        }
        body = json_bytes(
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        )
        deadline = Deadline(self.timeout, self.cap)
        sent = False
        try:
            with deadline.scope:
                async with self._request(body) as response:
                    sent = True
                    if response.status_code == 404:  # the server no longer knows the session
                        self.conn.drop("the server ended the session")
                        return None
                    if self.lean is not None and response.status_code in (401, 403):
                        return None  # refused unread: httpx2's auth flow answers on the usual path
                    # Closed here, not by the event loop's finalizer (a task per call).
                    async with aclosing(_messages(response, self.max_event_bytes)) as messages:
                        async for message in messages:
                            if message.get("id") == request_id and "method" not in message:
                                return await self._result(message)
                            await self._on_message(
                                message, request_id, deadline, on_progress, on_log, refuse
                            )
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            if not sent:
                return None
            raise self._lost() from None
        except httpx2.HTTPError as exc:
            raise self._lost() from exc
        except ValueError as exc:  # not JSON, or too big: the call fails, the session stays
            return _dump(error_result(f"MCP server {self.node!r} sent a malformed answer: {exc}"))
        except anyio.get_cancelled_exc_class():
            await self._cancel(request_id, "the caller cancelled the call")
            raise
        if deadline.scope.cancelled_caught:
            await self._cancel(request_id, "timed out")
            raise timed_out(deadline, self.tool, self.node)
        raise self._lost()  # the stream ended without the result

    def _request(self, body: bytes) -> AbstractAsyncContextManager[_Response]:
        if self.lean is not None:
            return self.lean.post(body, self._headers())
        return self.client.stream("POST", self.link.url, content=body, headers=self._headers())

    def _headers(self) -> dict[str, str]:
        return {
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
            "mcp-session-id": self.session_id,
            "mcp-protocol-version": self.protocol_version,
        }

    async def _result(self, message: JsonObject) -> JsonObject:
        error = message.get("error")
        if isinstance(error, dict):
            fields = cast(JsonObject, error)
            text = f"MCP error {fields.get('code')}: {fields.get('message')}"
            return _dump(error_result(text))
        result = message.get("result")
        try:
            checked = mcp_types.CallToolResult.model_validate(result)
        except ValidationError as exc:
            return _dump(error_result(f"MCP server {self.node!r} sent a malformed result: {exc}"))
        if not checked.is_error:
            try:
                await self.check_result(self.original, checked)
            except RuntimeError as exc:  # as `McpToolkit.call_tool` reports it
                return _dump(error_result(str(exc)))
        return cast(JsonObject, result)

    async def _on_message(
        self,
        message: JsonObject,
        request_id: str,
        deadline: Deadline,
        on_progress: Callable[[float, float | None, str | None], Awaitable[None]],
        on_log: Callable[[JsonObject], Awaitable[None]],
        refuse: Refuse,
    ) -> None:
        method = message.get("method")
        if not isinstance(method, str):
            return  # an answer to something else: not ours to read
        params = message.get("params")
        fields = cast(JsonObject, params) if isinstance(params, dict) else {}
        if "id" in message:
            await self._answer(message, method, refuse)
        elif method == "notifications/progress":
            if fields.get("progressToken") == request_id:
                deadline.alive()
                progress, total = fields.get("progress"), fields.get("total")
                if isinstance(progress, int | float):
                    total = total if isinstance(total, int | float) else None
                    said = fields.get("message")
                    await on_progress(progress, total, said if isinstance(said, str) else None)
        elif method == "notifications/message":
            await on_log(fields)
        else:
            await self.on_notification(message)

    async def _answer(self, request: JsonObject, method: str, refuse: Refuse) -> None:
        reply: JsonObject = {"jsonrpc": "2.0", "id": request["id"]}
        if method == "ping":
            reply["result"] = {}
        else:
            reply["error"] = refused(method, refuse(request)).model_dump(exclude_none=True)
        await self._post(reply)

    async def _cancel(self, request_id: str, reason: str) -> None:
        note = {"requestId": request_id, "reason": reason}
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_SECONDS):
            await self._post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}
            )

    async def _post(self, message: JsonObject) -> None:
        try:
            async with self._request(json_bytes(message)) as response:
                await response.aread()
        except httpx2.HTTPError as exc:
            log.debug("MCP server %r: could not send %s: %s", self.node, message.get("method"), exc)

    def _lost(self) -> ConnectionLost:
        return connection_lost(
            self.node, self.conn, f"the connection closed during a call to {self.tool!r}"
        )


class _Response(Protocol):
    """What is read of a response: httpx2's, or the lean client's."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    async def aread(self) -> bytes: ...
    def aiter_lines(self) -> AsyncIterator[str]: ...


async def _messages(response: _Response, max_event_bytes: int) -> AsyncGenerator[JsonObject]:
    """The JSON-RPC messages of a response: one JSON body, or one per SSE event."""
    if response.headers.get("content-type", "").startswith("application/json"):
        yield _object(await response.aread())
        return
    data: list[str] = []
    size = 0
    lines = response.aiter_lines()
    try:
        async for line in lines:
            if line.startswith("data:"):
                chunk = line[5:].removeprefix(" ")
                size += len(chunk)
                if size > max_event_bytes:
                    raise ValueError(f"an event is larger than {max_event_bytes} bytes")
                data.append(chunk)
            elif not line and data:
                yield _object("\n".join(data))
                data, size = [], 0
    finally:
        if isinstance(lines, AsyncGenerator):
            await lines.aclose()


def _object(text: str | bytes) -> JsonObject:
    decoded = json.loads(text)
    if not isinstance(decoded, dict):
        raise ValueError("the server sent a JSON-RPC message that is not an object")
    return cast(JsonObject, decoded)


def _dump(result: mcp_types.CallToolResult) -> JsonObject:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)
