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
  a closed stream: the spec says a disconnect is no cancel) and ended with the session;
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

import functools
import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import anyio
import anyio.abc
import mcp_types as types
from mcp.server.streamable_http import check_accept_headers
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkits import ServerRequestHandler, ToolkitError, error_result
from toolkits.mcp import Forward, McpToolkit, is_plain_text, plain_for_era
from toolkits.mcp.server_requests import refusal

from ...engine import Gateway
from ...run_context import HOPS_META_KEY
from ..client_requests.ask_client import asking_declared, missing_capability
from ..notifications.log_messages import log_levels
from ..transports.envelope import buffered_body, is_modern_post, posted_object
from ..transports.request_headers import by_name
from .handshake_sessions import HandshakeSessions, OpenSession, answered_as_json
from .pass_through_reply import LateWatch, Reply
from .pass_through_rounds import FirstRound, Rounds
from .proxied_tools import ProxiedTools

__all__ = ["PassThrough"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]

_ROUTING_HEADERS = frozenset({b"mcp-protocol-version", b"mcp-method", b"mcp-name"})
"""Headers the SDK refuses to see twice (`find_duplicated_routing_header`)."""
_READ_HEADERS = _ROUTING_HEADERS | {b"accept", b"content-type"}
"""What the checks of a 2026-07-28 call read (`check_accept_headers`, the ladder)."""
_READ = tuple((name, name.decode()) for name in _READ_HEADERS)


class _Call(NamedTuple):  # a tuple: made in a fifth of a frozen dataclass's bytecodes
    request_id: types.RequestId
    forward: Forward
    arguments: JsonObject
    hops: int
    progress_token: types.ProgressToken | None
    log_levels: frozenset[str]
    protocol_version: str
    session: OpenSession | None = None
    """The 2025-era session the call came on; None for a 2026-07-28 call."""
    asked_in_rounds: FirstRound | None = None
    """A 2026-07-28 call whose client can be asked: parked, its questions in rounds."""


class PassThrough:
    """ASGI: the calls this module describes go to their server directly; the rest to `app`."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        gateway: Gateway,
        tools: ProxiedTools,
        served_by: Callable[[str], object],
        stamp: Callable[[], JsonObject],
        sessions: HandshakeSessions | None = None,
        rounds: Rounds | None = None,
    ) -> None:
        self.app = app
        self._gateway = gateway
        self._tools = tools
        self._served_by = served_by
        self._stamp = stamp
        self._sessions = sessions
        self._rounds = rounds
        self._watchers: anyio.abc.TaskGroup | None = None
        # The backend's scope class (set in `running`): `anyio.CancelScope()` asks which
        # library runs, then builds the scope twice (~120 bytecodes a call).
        self._new_scope: type[anyio.CancelScope] = anyio.CancelScope
        self.watching: set[object] = set()
        """The watchers running now (for tests: one ends with its answer)."""
        self.forwarded = 0
        """Calls that went this way (for tests and the curious)."""

    @asynccontextmanager
    async def running(self) -> AsyncGenerator[None]:
        """Serve calls meanwhile: the watchers of the long ones run in a task group of ours."""
        async with anyio.create_task_group() as tg:
            self._watchers = tg
            self._new_scope = type(tg.cancel_scope)
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
        if not await self._forward(call, receive, send):  # the body read: what comes is the end
            assert body is not None
            await self.app(scope, _replaying(body, receive), send)

    async def _serve_session(
        self, session: OpenSession, scope: Scope, receive: Receive, send: Send
    ) -> None:
        body, replay = await buffered_body(receive)
        fields = posted_object(scope, body) if body is not None else None
        call = self._in_session(session, scope, fields) if fields is not None else None
        if call is None:
            if (
                fields is not None
                and session.questions is not None
                and answered_as_json(scope)  # else the SDK refuses the POST: so do we
                and session.questions.answered(fields)
            ):
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

    def _in_session(self, session: OpenSession, scope: Scope, fields: JsonObject) -> _Call | None:
        """The call a POST on `session` passes through, if the SDK would serve it so."""
        params = fields.get("params")
        if fields.get("method") != "tools/call" or not isinstance(params, dict):
            return None
        params = cast(JsonObject, params)
        if any(key in params for key in ("inputResponses", "requestState", "task")):
            return None
        raw_meta = params.get("_meta")
        meta = cast(JsonObject, raw_meta) if isinstance(raw_meta, dict) else {}
        if any(key.startswith("io.modelcontextprotocol/") for key in meta):
            return None  # a 2026-07-28 envelope on a session: the SDK's to judge
        if session.connection.client_capabilities is None or not answered_as_json(scope):
            return None
        version = session.protocol_version
        try:
            validate_client_request("tools/call", version, params)
            checked = types.CallToolRequestParams.model_validate(params, by_name=False)
        except (ValidationError, KeyError, ValueError):
            return None
        return self._route(fields["id"], checked, meta, version, session)

    def _eligible(self, scope: Scope, body: bytes) -> _Call | None:
        fields = posted_object(scope, body)
        if fields is None:
            return None
        params = fields.get("params")
        if fields.get("method") != "tools/call" or not isinstance(params, dict):
            return None
        params = cast(JsonObject, params)
        if "inputResponses" in params or "requestState" in params:
            return None
        headers = _plain_headers(scope)
        if headers is None or not _takes_json(headers.get("accept", "")):
            return None
        if not headers.get("content-type", "").startswith("application/json"):
            return None
        route = classify_inbound_request(fields, headers=headers)
        if not isinstance(route, InboundModernRoute):
            return None
        capabilities = route.client_capabilities
        if not isinstance(capabilities, dict):
            return None
        capabilities = cast(JsonObject, capabilities)
        answerable = asking_declared(capabilities)
        if answerable and (self._rounds is None or not self._rounds.open()):
            return None
        try:
            checked = types.CallToolRequestParams.model_validate(params, by_name=False)
        except ValidationError:
            return None
        raw_meta = params.get("_meta")
        meta = cast(JsonObject, raw_meta) if isinstance(raw_meta, dict) else {}
        asking = (capabilities, answerable) if answerable else None
        return self._route(fields["id"], checked, meta, route.protocol_version, asking=asking)

    def _route(
        self,
        request_id: types.RequestId,
        params: types.CallToolRequestParams,
        meta: JsonObject,
        version: str,
        session: OpenSession | None = None,
        *,
        asking: tuple[JsonObject, JsonObject] | None = None,
    ) -> _Call | None:
        """The call, if it goes this way; `asking`: the capabilities a 2026-07-28 client that
        can be asked declared, and the asking ones of them (its call is asked in rounds)."""
        if self._served_by(params.name) is not self._tools:
            return None
        tool = self._tools.listed(params.name)
        if tool is None:
            return None
        node = self._gateway.nodes.get(tool.source_node)
        forward = node.forward(tool.name) if isinstance(node, McpToolkit) else None
        if forward is None:
            return None
        hops = meta.get(HOPS_META_KEY, 0)
        hops = hops if isinstance(hops, int) and hops >= 0 else 0
        if hops >= self._gateway.max_depth:
            return None  # the usual path says why
        arguments = dict(params.arguments or {})
        return _Call(
            request_id=request_id,
            forward=forward,
            arguments=arguments,
            hops=hops,
            progress_token=meta.get("progressToken"),
            log_levels=frozenset(log_levels(version, meta)),
            protocol_version=version,
            session=session,
            asked_in_rounds=None
            if asking is None
            else FirstRound(params.name, arguments, hops, *asking),
        )

    async def _forward(self, call: _Call, receive: Receive, send: Send) -> bool:
        """Answer `call`; False if it never reached the server (the usual path takes it)."""
        session = call.session
        reply = Reply(send, call.request_id, session.id if session is not None else None)

        async def progress(done: float, total: float | None, message: str | None) -> None:
            if call.progress_token is None:
                return
            params: JsonObject = {"progressToken": call.progress_token, "progress": done}
            if total is not None:
                params["total"] = total
            if message is not None:
                params["message"] = message
            await reply.event("notifications/progress", params)

        async def server_log(params: JsonObject) -> None:
            if params.get("level") in call.log_levels:
                await reply.event("notifications/message", params)

        async def forwarded() -> JsonObject | None:
            return await forward.call(
                call.arguments,
                meta={HOPS_META_KEY: call.hops + 1},
                on_progress=progress,
                on_log=server_log,
                answer=answer,
                answerable=answerable,
                owner=session.connection if session is not None else None,
                scope=call_scope,
            )

        # A session's client declared its capabilities (`_in_session`): none to ask, or some.
        answerable: JsonObject = session.answerable() if session is not None else {}
        answer: ServerRequestHandler = _refuse
        if session is not None and answerable:
            answer = functools.partial(session.ask, reply.message)
        forward = call.forward
        result: JsonObject | None = None
        quota = session.quota(self._gateway) if session is not None else None
        # A 2026-07-28 client that goes away cancels its call; on a session, only its
        # `notifications/cancelled` or the session's end do (`session.call`). The call's
        # clock runs on the same scope (`Forward.call`): one scope a call.
        call_scope = self._new_scope()
        watch = self._watch(reply, receive, call_scope if session is None else None)
        try:
            with (
                call_scope,
                session.call(call.request_id, call_scope)
                if session is not None
                else nullcontext() as held,
            ):
                try:
                    if call.asked_in_rounds is not None:  # parked: it holds the limit itself
                        assert self._rounds is not None
                        result = await self._rounds.first(
                            forward, call.asked_in_rounds, on_progress=progress, on_log=server_log
                        )
                    elif quota is None:
                        async with self._gateway.node_limit(forward.node):
                            result = await forwarded()
                    else:  # the client's share first, as the usual path takes them
                        async with (
                            quota.limiter(forward.node),
                            self._gateway.node_limit(forward.node),
                        ):
                            result = await forwarded()
                except ToolkitError as exc:  # down, lost, timed out: as the usual path says it
                    result = _failed(forward, str(exc))
                except Exception as exc:  # a bug must not take the connection down
                    log.exception(
                        "passing %r through to node %r crashed", forward.tool, forward.node
                    )
                    result = _failed(forward, repr(exc))
            if held is not None and held.stopped is not None and result is None:
                self.forwarded += 1
                await reply.stopped(held.stopped)
                return True
            if call_scope.cancelled_caught:
                return True  # the client went away: nobody to answer
            if result is None and not reply.started:
                return False
            if result is None:  # the usual path cannot take over an answer already begun
                result = _failed(forward, "the server ended the session")
            self.forwarded += 1
            await reply.final(self._for_client(result, call.protocol_version))
            return True
        finally:
            watch.stop()

    def _watch(self, reply: Reply, receive: Receive, call: anyio.CancelScope | None) -> LateWatch:
        if self._watchers is None:
            raise RuntimeError("PassThrough serves inside its running()")
        return LateWatch(self._watchers, self.watching, reply, receive, call)

    def _for_client(self, result: JsonObject, version: str) -> JsonObject:
        """The server's result as the SDK would send it to a `version` client: in that
        version's shape, without the server's `serverInfo` stamp and, for a 2026-07-28
        client, with ours (`ProxiedTools.call`, `fit_to_era`)."""
        modern = version in MODERN_PROTOCOL_VERSIONS
        shaped = plain_for_era(result, version) if is_plain_text(result) else None
        if shaped is not None:
            result = shaped
        else:
            if not modern and not isinstance(result.get("structuredContent", {}), dict):
                result = {k: v for k, v in result.items() if k != "structuredContent"}
            try:
                # A handshake-era server's result has no `resultType`: it is complete.
                result = serialize_server_result(
                    "tools/call", version, {"resultType": "complete", **result}
                )
            except ValidationError as exc:  # checked by `Forward` already: a shape of this era
                result = _dump(error_result(f"the result does not fit protocol {version}: {exc}"))
        meta = result.get("_meta")
        rest = (
            {k: v for k, v in cast(JsonObject, meta).items() if k != SERVER_INFO_META_KEY}
            if isinstance(meta, dict)
            else {}
        )
        if modern:
            return {**result, "_meta": {**rest, SERVER_INFO_META_KEY: self._stamp()}}
        if isinstance(meta, dict) and SERVER_INFO_META_KEY in meta:
            result = {k: v for k, v in result.items() if k != "_meta"}
            return {**result, "_meta": rest} if rest else result
        return result


@dataclass(frozen=True, slots=True)
class _Headed:
    """What `check_accept_headers` reads of a request."""

    headers: dict[str, str]


@functools.lru_cache(maxsize=64)
def _takes_json(accept: str) -> bool:
    """Whether an `Accept` value takes JSON, as the SDK judges it (clients send one or two
    values, again and again: judged once each)."""
    return check_accept_headers(cast(Request, _Headed({"accept": accept})))[0]


def _plain_headers(scope: Scope) -> dict[str, str] | None:
    """The request headers the checks read, by lowercase name (the first of repeated ones, as
    Starlette's `Headers` reads them); None if a routing header is repeated or an `Mcp-Param-*`
    one is there (the SDK's to judge). Decodes only those."""
    found = by_name(scope)
    if found is not None:  # no name repeated, all lowercase: no scan in Python
        if b"\nmcp-param-" in b"\n" + b"\n".join(found):
            return None
        return {text: found[raw].decode("latin-1") for raw, text in _READ if raw in found}
    headers: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name = raw_name.lower()  # ASGI servers send names lowercase; one might not
        if name in _READ_HEADERS:
            text = name.decode("latin-1")
            if text in headers:
                if name in _ROUTING_HEADERS:
                    return None
                continue
            headers[text] = raw_value.decode("latin-1")
        elif name.startswith(b"mcp-param-"):
            return None
    return headers


async def _refuse(request: types.InputRequest) -> types.ErrorData:
    """The server's `request` refused for a client that declared no way to answer it."""
    missing = missing_capability(types.ClientCapabilities(), request)
    return refusal(request, missing or f"the upstream client cannot answer {request.method}")


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


def _failed(forward: Forward, why: str) -> JsonObject:
    """A failed call as the usual path reports it (`ProxiedTools.call`)."""
    return _dump(error_result(f"tool {forward.tool!r} (node {forward.node!r}) failed: {why}"))


def _dump(result: types.CallToolResult) -> JsonObject:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)
