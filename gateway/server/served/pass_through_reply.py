"""The HTTP answer to one call passed through (`pass_through`): one JSON body, or an event
stream once progress, a log message or a question must go first; and the watch on a call that
runs long (its client going away, silence to keep alive).

Silence is kept alive (a proxy may cut a connection idle for long) without turning the answer
into an event stream where it can help it: the mcp SDK's client refuses an event over 1 MB,
and takes a JSON body of any size. A call whose client can be asked nothing on it has its
JSON body begun (its headers, then a newline every `_PING_SECONDS`: whitespace before the
JSON, which JSON readers skip); its status is 200 whatever the end (a result, a JSON-RPC
error), and a notification that comes after that (progress, a log message) is dropped, as
advisory: the body can no longer become an event stream. A call whose client may be asked a
question (a 2025-era session that declared sampling, elicitation or roots) pings as an event
stream (`: ping`), which the question would need."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Generator
from contextlib import AbstractAsyncContextManager, contextmanager, nullcontext, suppress
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from starlette.types import Receive, Send

from toolkits import json_bytes

from .handshake_sessions import Stopped

__all__ = ["LateWatch", "Reply"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]

_WATCH_AFTER = 0.5
"""Seconds a call runs before its client is watched (for going away) and its answer pinged.
Under load most calls wait longer than they work: at 50 ms, 50 clients made every call start
a watcher, 10 % of the front's CPU a call (bench/RESULTS.md, item 35)."""
_PING_SECONDS = 15.0
"""Silence after which the answer is kept alive (as the SDK's pings its event streams)."""
_KEEP_ALIVE = b"\n"
"""A JSON answer's keep-alive: whitespace before the JSON."""
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"connection", b"keep-alive"),
    (b"x-accel-buffering", b"no"),
]


class Reply:
    """The HTTP answer to one call: JSON, or an event stream once something must go first."""

    # Class defaults, set per answer only by the rare call that needs them.
    _gone = False
    """Whether the client went away (`watch`)."""
    _awaiting: list[anyio.CancelScope] | None = None
    """The waits on the client's answer to a question (`awaiting_client`)."""
    _json = False
    """Whether a JSON body was begun to keep silence alive (see the module)."""

    def __init__(
        self,
        send: Send,
        request_id: types.RequestId,
        session_id: str | None,
        *,
        asks: bool = False,
    ) -> None:
        """`asks`: whether a question may be put to the client on this answer."""
        self._send = send
        self._asks = asks
        self._id = request_id
        self._session = [] if session_id is None else [(b"mcp-session-id", session_id.encode())]
        """The SDK names the session on every answer in it."""
        self._lock: anyio.Lock | None = None
        """Made by the first write that may meet another (an event, a ping): most answers are
        one JSON body, which the call's own task writes alone (`_last_turn`)."""
        self._quiet_since = asyncio.get_running_loop().time()  # anyio's clock on asyncio
        self.started = False
        self.complete = False

    async def event(self, method: str, params: JsonObject) -> None:
        await self.message({"jsonrpc": "2.0", "method": method, "params": params})

    async def message(self, message: JsonObject) -> None:
        """Send `message` (a notification, a question to the client) before the answer;
        dropped once the answer is complete (e.g. a question withdrawn as its call ended)."""
        data = json_bytes(message)
        async with self._writing():
            if self._json:
                log.debug("dropped %s: its call's JSON answer has begun", message.get("method"))
            elif not self.complete:
                await self._stream(b"event: message\r\ndata: " + data + b"\r\n\r\n")

    async def final(self, result: JsonObject) -> None:
        await self._last({"jsonrpc": "2.0", "id": self._id, "result": result})

    async def error(self, error: JsonObject) -> None:
        await self._last({"jsonrpc": "2.0", "id": self._id, "error": error})

    async def stopped(self, why: Stopped) -> None:
        """End the answer of a call stopped on a 2025-era session with no message: one its
        client cancelled gets no answer (the spec: the receiver of `notifications/cancelled`
        SHOULD NOT answer the request), nor one of an ended session. An event stream, for the
        SDK's client takes its end for "no answer" in silence, where a JSON body that comes as
        it leaves its session raised `BrokenResourceError` out of its `async with`."""
        async with self._last_turn():
            self.complete = True
            if self._json:  # a JSON body must end as JSON: the client drops an error for a
                # request it cancelled, as one for an id it no longer waits on
                error = {"code": types.INTERNAL_ERROR, "message": f"the call was stopped ({why})"}
                message = {"jsonrpc": "2.0", "id": self._id, "error": error}
                await self._send({"type": "http.response.body", "body": json_bytes(message)})
                return
            if not self.started:
                self.started = True
                await self._send(
                    {"type": "http.response.start", "status": 200, "headers": self._sse_headers()}
                )
            await self._send({"type": "http.response.body", "body": b""})

    async def _last(self, message: JsonObject) -> None:
        data = json_bytes(message)
        async with self._last_turn():
            self.complete = True
            if self._json:
                await self._send({"type": "http.response.body", "body": data})
                return
            if self.started:
                await self._send(
                    {
                        "type": "http.response.body",
                        "body": b"event: message\r\ndata: " + data + b"\r\n\r\n",
                    }
                )
                return
            self.started = True
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", b"%d" % len(data)),
                *self._session,
            ]
            await self._send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._send({"type": "http.response.body", "body": data})

    @contextmanager
    def awaiting_client(self) -> Generator[bool]:
        """The block waits on the client's answer to a question put on this answer: cancelled
        if the client goes meanwhile (`watch`); it gets False if the client is gone already."""
        if self._gone:
            yield False
            return
        with anyio.CancelScope() as scope:
            awaiting = self._awaiting = self._awaiting or []
            awaiting.append(scope)
            try:
                yield True
            finally:
                awaiting.remove(scope)

    async def watch(self, receive: Receive, call: anyio.CancelScope | None) -> None:
        """Until the answer is complete: if the client goes away, cancel `call` (if any) and
        stop waiting on its answers (`awaiting_client`); ping through silence, so a proxy's
        idle timeout does not end a long call (see the module)."""
        while not self.complete:
            with anyio.CancelScope(deadline=self._quiet_since + _PING_SECONDS):
                if (await receive())["type"] == "http.disconnect":
                    if not self.complete:
                        self._client_went(call)
                    return
                continue
            async with self._writing():
                if not self.complete and anyio.current_time() >= self._quiet_since + _PING_SECONDS:
                    await self._keep_alive()

    async def _keep_alive(self) -> None:
        if self._json or (not self.started and not self._asks):
            if not self._json:
                self._json = self.started = True
                headers = [(b"content-type", b"application/json"), *self._session]
                await self._send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._send({"type": "http.response.body", "body": _KEEP_ALIVE, "more_body": True})
            self._quiet_since = anyio.current_time()
        else:
            await self._stream(b": ping\r\n\r\n")

    def _client_went(self, call: anyio.CancelScope | None) -> None:
        # A session's call runs on (a disconnect is no cancel), but a question it put to
        # the client can no longer be answered to any purpose: its server hears so at once.
        self._gone = True
        if call is not None:
            call.cancel()
        for scope in self._awaiting or ():
            scope.cancel()

    def _writing(self) -> anyio.Lock:
        if self._lock is None:
            self._lock = anyio.Lock(fast_acquire=True)  # writers always await the send inside
        return self._lock

    def _last_turn(self) -> AbstractAsyncContextManager[object]:
        """The last write's turn: after any write under way; at once if none ever began, for
        then none can begin before `complete` is set (each checks it first)."""
        return nullcontext() if self._lock is None else self._lock

    async def _stream(self, chunk: bytes) -> None:
        if not self.started:
            self.started = True
            await self._send(
                {"type": "http.response.start", "status": 200, "headers": self._sse_headers()}
            )
        await self._send({"type": "http.response.body", "body": chunk, "more_body": True})
        self._quiet_since = anyio.current_time()

    def _sse_headers(self) -> list[tuple[bytes, bytes]]:
        return [*_SSE_HEADERS, *self._session] if self._session else _SSE_HEADERS


class LateWatch:
    """`Reply.watch` for a call not answered within `_WATCH_AFTER`, in the layer's task group.

    Most calls are answered sooner, and a task (and task group) per call would cost more than
    the rest of the hop's bookkeeping (bench/RESULTS.md); a client that goes away before the
    mark has its call cancelled at the mark. A watcher whose answer is complete ends by itself:
    the server tells a pending `receive` so (uvicorn, httpx's ASGI transport), and cancelling
    it would cost more (anyio formats the task's repr into every cancel reason).
    """

    __slots__ = ("_call", "_receive", "_reply", "_running", "_scope", "_stopped", "_tg", "_timer")

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        running: set[object],
        reply: Reply,
        receive: Receive,
        call: anyio.CancelScope | None,
    ) -> None:
        self._tg = tg
        self._running = running
        self._reply = reply
        self._receive = receive
        self._call = call
        self._scope: anyio.CancelScope | None = None
        self._stopped = False
        self._timer = asyncio.get_running_loop().call_later(_WATCH_AFTER, self._start)

    def _start(self) -> None:
        with suppress(RuntimeError):  # the layer stopped serving: its calls are being cancelled
            self._tg.start_soon(self._run)

    async def _run(self) -> None:
        with anyio.CancelScope() as self._scope:
            if self._stopped:
                return
            self._running.add(self)
            try:
                await self._reply.watch(self._receive, self._call)
            except Exception:  # the layer's task group serves every call: keep it
                log.exception("watching a call passed through failed")
            finally:
                self._running.discard(self)

    def stop(self) -> None:
        """The call is over: no watcher after all, and one without a complete answer ends."""
        self._stopped = True
        self._timer.cancel()
        if self._scope is not None and not self._reply.complete:
            self._scope.cancel()
