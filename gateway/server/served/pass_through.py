"""Proxied tool calls of 2026-07-28 HTTP clients, passed straight through when nothing in them
needs the SDK.

Most proxied calls change nothing on the way: the client names a tool of an exposed MCP
server, the server answers, the answer goes back. On the usual path the SDK's server (a
request context, models, dispatch) and its client (streams, tasks, models per request) cost
most of the hop (bench/RESULTS.md). `PassThrough` sits in front of the SDK's HTTP endpoint and
sends such a call on the node's session as raw JSON-RPC (`toolkits.mcp.Forward`): the result
goes back as the server sent it, with what the usual path changes too (our `serverInfo` stamp
instead of the server's, the client's id and progress token), progress and log messages as
they come (`application/json`, or `text/event-stream` once there is something to stream:
`pass_through_reply`).

A call takes this path only where the usual path would do the same; anything else goes to the
SDK untouched:
- a 2026-07-28 POST of one `tools/call` that the SDK's envelope ladder accepts, with no
  `Mcp-Param-*` header and no input responses or request state (no round to resume); or a
  `tools/call` POST on a live, initialized 2025-era session (`handshake_sessions`), which is
  answered as the SDK answers that session: in its protocol version's shape, its log levels,
  its client's share of the nodes, cancelled by the client's `notifications/cancelled` (not by
  a closed stream: the spec says a disconnect is no cancel) and then not answered (the spec:
  the receiver SHOULD NOT; its event stream ends), and ended with the session;
- a client that declared no sampling, elicitation or roots: what the server asks during the
  call is refused for the reason the usual path gives (`missing_capability`), with no round
  (a 2026-07-28 node declares none of them for such a call, on either path); or a 2025-era
  session's client that did: the server's questions are put to it on the call's answer, as
  the SDK puts them (`session_questions`); or a 2026-07-28 client that did, while a serving
  run parks requests: the call is parked as on the usual path, its questions go to the client
  in input-required rounds, and the retries are the usual path's (`pass_through_rounds`). A
  2026-07-28 node declares, with the call, what the client answers, as on the usual path;
- a tool of an exposed MCP node whose node has a live HTTP connection (either era: a
  2026-07-28 server's questions in input-required rounds are refused the same way) or a live
  handshake-era stdio session now (a call its server refuses for want of a grant the node
  must ask our client for goes the usual path, which asks, or refuses saying why:
  `forward_http`);
- a gateway that traces nothing and has no OAuth scope policy, and a hop count under the limit.
`[gateway] pass_through = false` turns it off.

Over HTTP it sits inside the session limits, which count a session's calls passed through as
its activity, and in front of an SDK session manager with no event store (nothing to resume:
a stream that closes loses what was not sent, on either path).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio
import anyio.abc
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ...limits import PerNode
from ..transports.envelope import buffered_body, is_modern_post, posted_object
from .handshake_sessions import HandshakeSessions, OpenSession, answered_as_json
from .modern_headers import accepts, plain_headers
from .pass_through_reply import LateWatch, Reply
from .passing import PassedCall, Passing

__all__ = ["PassThrough"]

JsonObject = dict[str, Any]


class PassThrough:
    """ASGI: the calls this module describes go to their server directly; the rest to `app`."""

    def __init__(
        self, app: ASGIApp, *, passing: Passing, sessions: HandshakeSessions | None = None
    ) -> None:
        self.app = app
        self.passing = passing
        self._sessions = sessions
        self._watchers: anyio.abc.TaskGroup | None = None
        self.watching: set[object] = set()
        """The watchers running now (for tests: one ends with its answer)."""

    @property
    def forwarded(self) -> int:
        """Calls that went this way (for tests and the curious)."""
        return self.passing.forwarded

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        """Serve calls meanwhile: the watchers of the long ones run in a task group of ours."""
        async with anyio.create_task_group() as tg:
            self._watchers = tg
            self.passing.new_scope = type(tg.cancel_scope)
            try:
                yield
            finally:
                self._watchers = None
                tg.cancel_scope.cancel()

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if is_modern_post(scope):
            return self._serve(scope, receive, send)
        if self._sessions is not None and scope["type"] == "http" and scope["method"] == "POST":
            session = self._sessions.find(scope)
            if session is not None:
                return self._serve_session(session, scope, receive, send)
        return self.app(scope, receive, send)  # no frame here while a stream is open

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        body, replay = await buffered_body(receive)
        call = self._eligible(scope, body) if body is not None else None
        if call is None:
            await self.app(scope, replay, send)
            return
        quota = self.passing.caller_quota(scope)
        # The body read: what comes is the end.
        if not await self._forward(call, receive, send, quota):
            assert body is not None
            await self.app(scope, _replaying(body, receive), send)

    async def _serve_session(
        self, session: OpenSession, scope: Scope, receive: Receive, send: Send
    ) -> None:
        body, replay = await buffered_body(receive)
        fields = posted_object(scope, body) if body is not None else None
        call = self.passing.in_session(session, fields) if fields is not None else None
        if call is not None and not answered_as_json(scope):
            call = None  # the SDK refuses such a POST: so does it, on the usual path
        if call is None:
            if (
                fields is not None
                and session.questions is not None
                and answered_as_json(scope)  # else the SDK refuses the POST: so do we
                and session.questions.answered(fields)
            ):
                assert session.id is not None  # sessions over HTTP have one
                await _accepted(send, session.id)
                return
            if fields is not None and fields.get("method") == "notifications/cancelled":
                params = fields.get("params")
                if isinstance(params, dict):  # the SDK answers it all the same
                    session.stop(cast(JsonObject, params).get("requestId"), "cancelled")
            await self.app(scope, replay, send)
            return
        if not await self._forward(call, receive, send):  # the body read: what comes is the end
            assert body is not None
            await self.app(scope, _replaying(body, receive), send)

    def _eligible(self, scope: Scope, body: bytes) -> PassedCall | None:
        fields = posted_object(scope, body)
        if fields is None:
            return None
        params = fields.get("params")
        if fields.get("method") != "tools/call" or not isinstance(params, dict):
            return None
        params = cast(JsonObject, params)
        if "inputResponses" in params or "requestState" in params:
            return None
        headers = plain_headers(scope)
        if headers is None or not accepts(headers.get("accept", ""))[0]:
            return None
        if not headers.get("content-type", "").startswith("application/json"):
            return None
        return self.passing.enveloped(fields, params, headers)

    async def _forward(
        self, call: PassedCall, receive: Receive, send: Send, quota: PerNode | None = None
    ) -> bool:
        """Answer `call`; False if it never reached the server (the usual path takes it).
        `quota`: its client's share of the nodes, for a call on no session."""
        session = call.session
        asks = session is not None and bool(session.answerable())  # as `Passing.answer` asks
        reply = Reply(send, call.request_id, session.id if session is not None else None, asks=asks)
        # A 2026-07-28 client that goes away cancels its call; on a session, only its
        # `notifications/cancelled` or the session's end do (`session.call`). The call's
        # clock runs on the same scope (`Forward.call`): one scope a call.
        call_scope = self.passing.new_scope()
        if self._watchers is None:
            raise RuntimeError("PassThrough serves inside its running()")
        watch = LateWatch(
            self._watchers, self.watching, reply, receive, call_scope if session is None else None
        )
        try:
            return await self.passing.answer(call, reply, call_scope, quota)
        finally:
            watch.stop()


async def _accepted(send: Send, session_id: str) -> None:
    """Answer a POST of the client's answer to a question as the SDK answers one (202)."""
    headers = [(b"content-type", b"application/json"), (b"mcp-session-id", session_id.encode())]
    await send({"type": "http.response.start", "status": 202, "headers": headers})
    await send({"type": "http.response.body", "body": b""})


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay
