"""Passed-through calls of 2026-07-28 clients that can be asked: parked, asked in rounds.

A 2026-07-28 client cannot be sent requests: a question of the server ends the request with an
`InputRequiredResult`, and the client's retry brings the answer. The usual path runs a call
whose server may ask as a parked request (`client_requests.parked_calls`), in a task of the
serving run, that the client's retries continue. A call that `PassThrough` takes from such a
client starts the same way: its first round runs the call on the node's connection
(`Forward.call`) as a parked request of the same run, and ends with the server's result, passed
on as it came, or with the server's first questions. Those reach the client as the usual path
sends them, the request's state sealed by the server's own boundary (`RequestStateBoundary`:
bound to the tool, its arguments and the caller), so a retry is the usual path's: the SDK
unseals it and `for_client` continues the parked request, whose result is the server's JSON
(`call_result`).

Most calls ask nothing: they cost a parked task and its round, not the SDK on both sides.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.request_state import RequestStateBoundary
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from toolkits import CallContext, ToolkitError, error_result, validation_brief
from toolkits.mcp import Forward, ProtocolErrorResult, protocol_error_result

from ...limits import Share
from ..client_requests.ask_client import missing_capability
from ..client_requests.parked_calls import ParkedCalls
from ..serving import ServingNow
from .relaying import forwarded_meta

__all__ = ["FirstRound", "Rounds", "call_result"]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]
_FIRST = types.InputResponseRequestParams()
"""A first round's: no answers, no state (read only)."""
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
LogFields = Callable[[JsonObject], Awaitable[None]]


class Rounds:
    """The serving run's parked requests and state boundary, for calls passed through."""

    def __init__(self, now: ServingNow, boundary: RequestStateBoundary) -> None:
        self._now = now
        self._boundary = boundary

    def open(self) -> bool:
        """Whether a serving run parks requests now (else such calls take the usual path)."""
        return self._now.current is not None

    async def first(
        self,
        forward: Forward,
        call: FirstRound,
        *,
        on_progress: Progress,
        on_log: LogFields,
        share: Share,
    ) -> JsonObject | None:
        """The first round of `call`: the server's result, or an input-required result with
        its questions and the sealed state the client's retry continues it by; None if the
        request never reached the server (the usual path takes it). Raises the server's
        JSON-RPC error (`MCPError`), to pass on as sent. The call holds a slot of the
        client's `share` of the node across its rounds."""
        serving = self._now.current
        if serving is None:
            return None
        parked: ParkedCalls = serving.parked
        declared: list[types.ClientCapabilities] = []

        def check(request: types.InputRequest) -> str | None:
            if not declared:  # read once, and only when the server asks
                try:
                    capabilities = types.ClientCapabilities.model_validate(call.capabilities)
                except ValidationError:  # the envelope's check let it by: it declares nothing
                    capabilities = types.ClientCapabilities()
                declared.append(capabilities)
            return missing_capability(declared[0], request)

        async def relay_log(params: types.LoggingMessageNotificationParams) -> None:
            await on_log(params.model_dump(mode="json", by_alias=True, exclude_none=True))

        # One scope for the parked request and its node call's clock (`Forward.call`).
        scope = parked.new_scope()
        outcome = await parked.serve(
            _FIRST,
            self._work(forward, call, scope, share),
            meta=forwarded_meta(call.meta, call.hops),
            check=check,
            answerable=call.answerable,
            report=on_progress,
            log=relay_log,
            scope=scope,
        )
        if isinstance(outcome, ProtocolErrorResult):
            raise MCPError.from_error_data(outcome.error)  # the server's, to pass on as sent
        if not isinstance(outcome, types.InputRequiredResult):
            return outcome
        asked = outcome.model_dump(mode="json", by_alias=True, exclude_none=True)
        if outcome.request_state is not None:
            asked["requestState"] = await self._sealed(call, outcome.request_state)
        return asked

    def _work(
        self, forward: Forward, call: FirstRound, scope: anyio.CancelScope, share: Share
    ) -> Callable[[CallContext], Awaitable[JsonObject | ProtocolErrorResult | None]]:
        async def work(context: CallContext) -> JsonObject | ProtocolErrorResult | None:
            async def server_log(fields: JsonObject) -> None:
                if context.on_log is None:
                    return
                try:
                    params = types.LoggingMessageNotificationParams.model_validate(fields)
                except ValidationError:
                    log.debug("node %r: a malformed log message dropped", forward.node)
                    return
                await context.on_log(params)

            assert context.on_progress is not None
            assert context.answer is not None
            # Held for the whole call, across its rounds, as the usual path holds it.
            await share.take(context.on_progress)
            try:
                return await forward.call(
                    call.arguments,
                    meta=context.meta or {},
                    on_progress=context.on_progress,
                    on_log=server_log,
                    answer=context.answer,
                    answerable=context.answerable,
                    owner=context.owner,
                    scope=scope,
                    yield_after=context.yield_after,
                )
            except MCPError as exc:  # the server's error: kept for a retry's answer too
                return protocol_error_result(exc.error)
            except ToolkitError as exc:  # down, lost, timed out: as the usual path says it
                failed = error_result(
                    f"tool {forward.tool!r} (node {forward.node!r}) failed: {exc}"
                )
                return failed.model_dump(mode="json", by_alias=True, exclude_none=True)
            finally:
                share.release()

        return work

    async def _sealed(self, call: FirstRound, state: str) -> str:
        """`state` sealed as the server's boundary seals what a handler returns for this
        request (its method, tool and arguments, and the caller's token)."""
        request = _Request("tools/call", {"name": call.tool, "arguments": call.arguments})

        async def minted(_ctx: ServerRequestContext[Any, Any]) -> JsonObject:
            return {"resultType": "input_required", "requestState": state}

        # The boundary reads only the request's method and params (and the caller's token
        # from the request's context): a stand-in carries them.
        context = cast(ServerRequestContext[Any, Any], request)
        sealed = cast(JsonObject, await self._boundary(context, minted))
        return cast(str, sealed["requestState"])


@dataclass(frozen=True, slots=True)
class FirstRound:
    """A call as its client sent it."""

    tool: str
    """The name the client called it by."""
    arguments: JsonObject
    hops: int
    meta: JsonObject
    """The `_meta` the client sent."""
    capabilities: JsonObject
    """The client capabilities the request declared."""
    answerable: JsonObject
    """The `ASKING` ones of them (`ask_client.asking_declared`)."""


@dataclass(frozen=True, slots=True)
class _Request:
    method: str
    params: JsonObject


def call_result(outcome: object) -> types.CallToolResult:
    """The result a parked call ended with, for a retry of the usual path: a call that began
    passed through ends with the server's JSON (`Rounds.first`)."""
    if isinstance(outcome, types.CallToolResult):
        return outcome
    if outcome is None:  # not reachable after a first round: it reached the server
        return error_result("the call never reached its server")
    try:
        return types.CallToolResult.model_validate(outcome)
    except ValidationError as exc:
        return error_result(f"the server sent a malformed result: {validation_brief(exc, 'it')}")
