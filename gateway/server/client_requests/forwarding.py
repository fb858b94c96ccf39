"""A 2026-07-28 retry of a request parked on another replica is sent on to that replica.

A proxied request whose downstream server asks our client mid-call is parked in the process
that runs it (`parked_calls`): its downstream call is a live exchange there and cannot move.
Behind a round-robin load balancer the client's retry may reach another replica, so the
parked request's `requestState` names the replica that runs it (the URL its peers reach it
at, sealed with the rest: a client cannot point it elsewhere), and a replica that gets a retry
it does not run sends it on: the same request, its sealed `requestState` and the client's
`Authorization` header, over streamable HTTP as a 2026-07-28 client; the replica that runs it
answers as if the client had reached it, its progress and log messages relayed back.

`keep_wire_state` (server middleware, before the state boundary) keeps the sealed state the
client sent, which the boundary replaces with its plaintext.
"""

from __future__ import annotations

import contextvars
import logging
import os
from collections.abc import Mapping
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.shared.exceptions import MCPError

from toolkits import ProgressCallback, ServerLogHandler
from toolkits.errors import find_error
from toolkits.mcp.error_text import describe_error

__all__ = ["FORWARD_TIMEOUT", "Here", "forward_round", "keep_wire_state"]

_log = logging.getLogger(__name__)

FORWARD_TIMEOUT = 60.0
"""Seconds a forwarded round may take to answer (it ends at the next question or result)."""

_wire_state: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "agent_gateway_wire_state", default=None
)


class Here:
    """The URL this replica's peers reach it at (None: not known, nothing is forwarded to
    it); set once it serves HTTP."""

    def __init__(self) -> None:
        self.url: str | None = None


async def keep_wire_state(
    ctx: ServerRequestContext[Any, Any], call_next: CallNext
) -> HandlerResult:
    """Server middleware: keeps the request's sealed `requestState` for `forward_round`."""
    wire = ctx.params.get("requestState") if ctx.params is not None else None
    token = _wire_state.set(wire if isinstance(wire, str) else None)
    try:
        return await call_next(ctx)
    finally:
        _wire_state.reset(token)


async def forward_round(
    owner: str,
    ctx: ServerRequestContext[Any, Any],
    params: types.InputResponseRequestParams,
    state: str,
    *,
    report: ProgressCallback,
    log: ServerLogHandler,
) -> Any:
    """This round of a request parked at `owner`, answered there: its result, or an
    `InputRequiredResult` naming the same parked request (`state`). Raises `MCPError` when
    `owner` cannot be reached or refuses the round."""
    wire = _wire_state.get()
    if wire is None:
        raise MCPError(types.INVALID_PARAMS, "this retry carries no requestState to send on")
    headers: dict[str, str] = {}
    request = ctx.request
    authorization = _header(getattr(request, "headers", None), "authorization")
    if authorization is not None:
        headers["Authorization"] = authorization

    async def relay_log(params: types.LoggingMessageNotificationParams) -> None:
        await log(params)

    _log.info("a round of a request parked at %s is sent on there", owner)
    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=FORWARD_TIMEOUT) as http,
            Client(
                streamable_http_client(owner, http_client=http),
                logging_callback=relay_log,
                read_timeout_seconds=FORWARD_TIMEOUT,
            ) as client,
        ):
            answer = await _send(client, ctx.method, params, wire, report)
    except MCPError:
        raise
    except Exception as exc:
        raise MCPError(
            types.INVALID_PARAMS,
            f"the replica running this request ({owner}) cannot be reached ({_why(exc)}); "
            "send it again",
        ) from exc
    if isinstance(answer, types.InputRequiredResult):
        return types.InputRequiredResult(input_requests=answer.input_requests, request_state=state)
    return answer


async def _send(
    client: Client,
    method: str,
    params: types.InputResponseRequestParams,
    wire: str,
    report: ProgressCallback,
) -> Any:
    answers = params.input_responses
    session = client.session

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        await report(progress, total, message)

    if isinstance(params, types.CallToolRequestParams) and method == "tools/call":
        return await session.call_tool(
            params.name,
            params.arguments,
            progress_callback=progress,
            input_responses=answers,
            request_state=wire,
            allow_input_required=True,
        )
    if isinstance(params, types.GetPromptRequestParams) and method == "prompts/get":
        return await session.get_prompt(
            params.name,
            params.arguments,
            input_responses=answers,
            request_state=wire,
            allow_input_required=True,
        )
    if isinstance(params, types.ReadResourceRequestParams) and method == "resources/read":
        return await session.read_resource(
            params.uri, input_responses=answers, request_state=wire, allow_input_required=True
        )
    raise MCPError(types.INVALID_PARAMS, f"{method} cannot be sent on to another replica")


def _why(exc: BaseException) -> str:
    """Why `owner` could not be reached, in its own words: the SDK's client wraps the error in
    task groups (quoted as "unhandled errors in a TaskGroup"), and httpx words a refused
    connection "All connection attempts failed"."""
    lost = find_error(exc, ConnectionError)  # refused, reset, aborted: a replica gone
    if lost is not None and lost.errno is not None:
        return os.strerror(lost.errno).lower()
    return describe_error(exc)


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    return headers.get(name) if headers is not None else None
