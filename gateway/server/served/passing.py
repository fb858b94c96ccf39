"""A proxied tool call passed straight through, whatever carries it: which calls may go so
(`Passing.in_session` for a 2025-era session's, `Passing.enveloped` for a 2026-07-28 call's,
both by `Passing.route`), and answering one on the node's connection as raw JSON-RPC
(`Passing.answer`) onto an `Answer`: an HTTP response (`pass_through`) or lines on stdout
(`stdio_shortcut`). Each transport judges what only it sees (headers, its sessions) and hands
the rest here, so routing, limits, cancellation, the server's questions and the result's shape
are one code for both.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any, NamedTuple, Protocol, cast

import anyio
import mcp_types as types
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request
from mcp_types import SERVER_INFO_META_KEY
from mcp_types.methods import serialize_server_result, validate_client_request
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.types import Scope

from toolkits import ServerRequestHandler, ToolkitError, error_result
from toolkits.mcp import (
    Forward,
    McpToolkit,
    is_plain_text,
    plain_for_era,
    protocol_error_result,
    too_deep_text,
)
from toolkits.mcp.server_requests import refusal
from toolkits.nesting import too_deep

from ...engine import Gateway
from ...limits import PerNode
from ...run_context import HOPS_META_KEY
from ..client_requests.ask_client import (
    asking_declared,
    elicitation_completer,
    missing_capability,
)
from ..notifications.log_messages import log_levels
from ..running_calls import RunningCalls, stopped_result
from ..serving import ServingNow, caller_of
from .handshake_sessions import OpenSession, Stopped
from .pass_through_rounds import FirstRound, Rounds
from .proxied_tools import ProxiedTools
from .relaying import forwarded_meta, relayed_error

__all__ = ["Answer", "PassedCall", "Passing"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]


class Answer(Protocol):
    """Where a call passed through is answered, in order: messages first (progress, log
    messages, the server's questions), then its result, or the end of a stopped call."""

    @property
    def started(self) -> bool:
        """Whether anything was sent: the usual path can no longer take the call over."""
        ...

    async def event(self, method: str, params: JsonObject) -> None: ...

    async def message(self, message: JsonObject) -> None: ...

    async def final(self, result: JsonObject) -> None: ...

    async def error(self, error: JsonObject) -> None:
        """Answer with a JSON-RPC error (the server's, as it sent it)."""
        ...

    async def stopped(self, why: Stopped) -> None:
        """End the answer of a call its client cancelled, or whose session ended."""
        ...

    def awaiting_client(self) -> AbstractContextManager[bool]:
        """The block waits on the client's answer to a question put on this answer: cancelled
        if the client goes meanwhile; it gets False if the client is gone already."""
        ...


class PassedCall(NamedTuple):  # a tuple: made in a fifth of a frozen dataclass's bytecodes
    request_id: types.RequestId
    name: str
    """The tool's name as the client called it."""
    forward: Forward
    arguments: JsonObject
    hops: int
    meta: JsonObject
    """The `_meta` the client sent."""
    progress_token: types.ProgressToken | None
    log_levels: frozenset[str]
    protocol_version: str
    session: OpenSession | None = None
    """The 2025-era session the call came on; None for a 2026-07-28 call."""
    asked_in_rounds: FirstRound | None = None
    """A 2026-07-28 call whose client can be asked: parked, its questions in rounds."""


class Passing:
    """The gateway's side of calls passed through (see the module docstring)."""

    def __init__(
        self,
        *,
        gateway: Gateway,
        tools: ProxiedTools,
        served_by: Callable[[str], object],
        stamp: Callable[[], JsonObject],
        rounds: Rounds | None = None,
        now: ServingNow | None = None,
        running: RunningCalls | None = None,
    ) -> None:
        """`running`: the server's calls in flight, which count these too; while it refuses
        new calls, none goes this way (the usual path answers them saying why)."""
        self.gateway = gateway
        self._running = running or RunningCalls()
        self._now = now
        self._tools = tools
        self._served_by = served_by
        self._stamp = stamp
        self.rounds = rounds
        # `anyio.CancelScope()` asks which library runs, then builds the scope twice (~120
        # bytecodes a call): a transport that runs sets the backend's own class here.
        self.new_scope: type[anyio.CancelScope] = anyio.CancelScope
        self.forwarded = 0
        """Calls that went this way (for tests and the curious)."""

    def caller_quota(self, scope: Scope) -> PerNode | None:
        """The share of the nodes of who sent the HTTP request `scope` on no session, as the
        usual path finds it (`ClientQuotas`); None if no serving run keeps them."""
        serving = self._now.current if self._now is not None else None
        return None if serving is None else serving.quotas.of_caller(caller_of(scope), self.gateway)

    def in_session(self, session: OpenSession, fields: JsonObject) -> PassedCall | None:
        """The `tools/call` request `fields` on a 2025-era `session`, if it goes this way as
        far as the message shows (the transport judged the rest)."""
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
        if session.connection.client_capabilities is None:
            return None
        version = session.protocol_version
        try:
            validate_client_request("tools/call", version, params)
            checked = types.CallToolRequestParams.model_validate(params, by_name=False)
        except (ValidationError, KeyError, ValueError):
            return None
        return self.route(fields["id"], checked, meta, version, session)

    def enveloped(
        self, fields: JsonObject, params: JsonObject, headers: dict[str, str] | None = None
    ) -> PassedCall | None:
        """The 2026-07-28 `tools/call` request `fields` (with `params`, a `tools/call`'s, no
        round to resume), if it goes this way as far as its envelope shows (over HTTP checked
        against its `headers` too, as the SDK's ladder checks them)."""
        route = classify_inbound_request(fields, headers=headers)
        if not isinstance(route, InboundModernRoute):
            return None
        capabilities = route.client_capabilities
        if not isinstance(capabilities, dict):
            return None
        capabilities = cast(JsonObject, capabilities)
        answerable = asking_declared(capabilities)
        if answerable and (self.rounds is None or not self.rounds.open()):
            return None
        try:
            checked = types.CallToolRequestParams.model_validate(params, by_name=False)
        except ValidationError:
            return None
        raw_meta = params.get("_meta")
        meta = cast(JsonObject, raw_meta) if isinstance(raw_meta, dict) else {}
        asking = (capabilities, answerable) if answerable else None
        return self.route(fields["id"], checked, meta, route.protocol_version, asking=asking)

    def route(
        self,
        request_id: types.RequestId,
        params: types.CallToolRequestParams,
        meta: JsonObject,
        version: str,
        session: OpenSession | None = None,
        *,
        asking: tuple[JsonObject, JsonObject] | None = None,
    ) -> PassedCall | None:
        """The call, if it goes this way; `asking`: the capabilities a 2026-07-28 client that
        can be asked declared, and the asking ones of them (its call is asked in rounds)."""
        if self._served_by(params.name) is not self._tools or self._running.refusing:
            return None
        tool = self._tools.passable(params.name)  # a tool a rule gates: the usual path asks
        if tool is None:
            return None
        node = self.gateway.nodes.get(tool.source_node)
        forward = node.forward(tool.name) if isinstance(node, McpToolkit) else None
        if forward is None:
            return None
        hops = meta.get(HOPS_META_KEY, 0)
        hops = hops if isinstance(hops, int) and hops >= 0 else 0
        if hops >= self.gateway.max_depth:
            return None  # the usual path says why
        arguments = dict(params.arguments or {})
        return PassedCall(
            request_id=request_id,
            name=params.name,
            forward=forward,
            arguments=arguments,
            hops=hops,
            meta=meta,
            progress_token=meta.get("progressToken"),
            log_levels=log_levels(version, meta, session.connection if session else None),
            protocol_version=version,
            session=session,
            asked_in_rounds=None
            if asking is None
            else FirstRound(params.name, arguments, hops, meta, *asking),
        )

    async def answer(
        self,
        call: PassedCall,
        reply: Answer,
        call_scope: anyio.CancelScope,
        quota: PerNode | None = None,
    ) -> bool:
        """Answer `call` on `reply`; False if it never reached the server (the usual path
        takes it). `call_scope` (made by `new_scope`, not entered) is the call's: cancelling
        it cancels the call (its client went away); the call's clock runs on it too. `quota`:
        the client's share of the nodes, for a call on no session (a session's is its own;
        none: the call is a client of its own)."""
        session = call.session

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

        async def complete(elicitation_id: str) -> None:
            params = {"elicitationId": elicitation_id}
            await reply.event("notifications/elicitation/complete", params)

        async def forwarded() -> JsonObject | None:
            return await forward.call(
                call.arguments,
                meta=forwarded_meta(call.meta, call.hops),
                on_progress=progress,
                on_log=server_log,
                answer=answer,
                answerable=answerable,
                owner=session.connection if session is not None else None,
                scope=call_scope,
                on_elicitation_complete=(
                    None
                    if session is None or answer is _refuse
                    else elicitation_completer(call.protocol_version, complete)
                ),
            )

        # A session's client declared its capabilities (`in_session`): none to ask, or some.
        answerable: JsonObject = session.answerable() if session is not None else {}
        answer: ServerRequestHandler = _refuse
        if session is not None and answerable:
            answer = functools.partial(session.ask, reply)
        forward = call.forward
        result: JsonObject | None = None
        error: types.ErrorData | None = None
        gateway = self.gateway
        if session is not None:
            quota = session.quota(gateway)
        share = (quota or gateway.client_quota()).limiter(forward.node)
        running = self._running
        with (
            running.counted(),
            call_scope,
            session.call(call.request_id, call_scope)
            if session is not None
            else nullcontext() as held,
        ):
            running.hold(call_scope)  # ended, and answered below, if the server stops
            try:
                if call.asked_in_rounds is not None:  # parked: it holds the limit itself
                    assert self.rounds is not None
                    result = await self.rounds.first(
                        forward,
                        call.asked_in_rounds,
                        on_progress=progress,
                        on_log=server_log,
                        share=share,
                    )
                else:
                    await share.take(progress)  # as the usual path holds it, and says a wait
                    try:
                        result = await forwarded()
                    finally:
                        share.release()
            except MCPError as exc:  # the server's JSON-RPC error (or a refused round)
                error = exc.error
            except ToolkitError as exc:  # down, lost, timed out: as the usual path says it
                result = _failed(forward, str(exc))
            except Exception as exc:  # a bug must not take the connection down
                log.exception("passing %r through to node %r crashed", forward.tool, forward.node)
                result = _failed(forward, repr(exc))
            finally:
                running.release(call_scope)
        if held is not None and held.stopped is not None and result is None and error is None:
            self.forwarded += 1
            await reply.stopped(held.stopped)
            return True
        if call_scope.cancelled_caught:
            if running.ended is None:
                return True  # the client went away: nobody to answer
            # The server stops, and ended the call: the answer says so, as the usual path's.
            result, error = _dump(stopped_result(call.name, running.ended)), None
        if error is not None:  # as the usual path relays it (`proxied_tools.answered`)
            relayed = relayed_error(error, call.protocol_version)
            if relayed is not None:
                self.forwarded += 1
                await reply.error(relayed.model_dump(mode="json", by_alias=True, exclude_none=True))
                return True
            result = _dump(protocol_error_result(error))
        elif result is None and not reply.started:
            return False
        if result is None:  # the usual path cannot take over an answer already begun
            result = _failed(forward, "the server ended the session")
        self.forwarded += 1
        await reply.final(self.for_client(result, call.protocol_version, forward.node))
        return True

    def for_client(self, result: JsonObject, version: str, node: str) -> JsonObject:
        """The server's (`node`'s) result as the SDK would send it to a `version` client: in
        that version's shape, without the server's `serverInfo` stamp and, for a 2026-07-28
        client, with ours (`ProxiedTools.call`, `fit_to_era`). A result nested deeper than a
        result may is an error result (text alone nests 3 deep; other shapes are measured)."""
        modern = version in MODERN_PROTOCOL_VERSIONS
        shaped = plain_for_era(result, version) if is_plain_text(result) else None
        if shaped is not None:
            result = shaped
        elif (deep := too_deep(result)) is not None:
            result = _dump(error_result(too_deep_text(node, deep)))
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


async def _refuse(request: types.InputRequest) -> types.ErrorData:
    """The server's `request` refused for a client that declared no way to answer it."""
    missing = missing_capability(types.ClientCapabilities(), request)
    return refusal(request, missing or f"the upstream client cannot answer {request.method}")


def _failed(forward: Forward, why: str) -> JsonObject:
    """A failed call as the usual path reports it (`ProxiedTools.call`)."""
    return _dump(error_result(f"tool {forward.tool!r} (node {forward.node!r}) failed: {why}"))


def _dump(result: types.CallToolResult) -> JsonObject:
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)
