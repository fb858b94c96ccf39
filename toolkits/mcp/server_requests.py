"""Requests a server sends its client during a call (sampling, elicitation, roots): who answers.

A node declares all three client capabilities to its server (so servers offer the tools that
need them) and answers on behalf of whoever made the call in flight. Code that makes calls for
someone else (the gateway's proxy, for its own MCP client) wraps them in
`answering(handler, owner=...)`; calls made outside such a block (an agent's) have nobody to
ask, and their servers' requests are refused.

Which call a request belongs to:

- On 2026-07-28 connections the requests come inside the call's own result (input-required
  rounds) and the SDK answers them in the calling task; over streamable HTTP it runs the
  callback in the context of the call whose response stream carried the request. Either way
  the call is known exactly (a context variable set for the call's duration).
- Handshake-era stdio and SSE say nothing about it on the wire. Then the node looks at its calls
  in flight: if they all have one owner (one upstream client), that owner answers; calls of
  several owners make the request ambiguous, and it is refused rather than shown to the wrong
  client. A request while no call is in flight (a server syncing roots at startup) is refused.

Refusals are `ErrorData` the server receives as an MCP error whose message says why.

Log messages (`notifications/message`) a server sends during a call are attributed the same
way and go to the handlers of the `on_server_log` blocks the call was made in (the proxy's,
for its client; the engine's, for the trace). An ambiguous or unattributable message goes to
nobody: the node writes every message to its Python log anyway.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import mcp_types
from mcp.client.session import ClientRequestContext
from mcp_types import ErrorData, InputRequest, InputResponse

__all__ = [
    "Answerer",
    "CallsInFlight",
    "InFlightCall",
    "LogListener",
    "ServerLogHandler",
    "ServerRequestHandler",
    "answering",
    "on_server_log",
    "refusal",
]

ServerRequestHandler = Callable[[InputRequest], Awaitable[InputResponse | ErrorData]]
"""Answers one request a server sent its client; an `ErrorData` refuses it."""


@dataclass(frozen=True, eq=False)
class Answerer:
    """Who answers the server requests of the calls made in one `answering` block."""

    handle: ServerRequestHandler
    owner: object
    """Calls of one owner (one upstream client connection) may answer each other's requests when
    the transport does not say which call a request belongs to."""


_answerer: ContextVar[Answerer | None] = ContextVar("toolkits.mcp.answerer", default=None)

ServerLogHandler = Callable[[mcp_types.LoggingMessageNotificationParams], Awaitable[None]]
"""Takes one log message a server sent during a call made in an `on_server_log` block."""


@dataclass(frozen=True, eq=False)
class LogListener:
    """Who hears the log messages of the calls made in one `on_server_log` block."""

    handle: ServerLogHandler
    owner: object


_log_listeners: ContextVar[tuple[LogListener, ...]] = ContextVar(
    "toolkits.mcp.log_listeners", default=()
)


@contextmanager
def answering(handle: ServerRequestHandler, *, owner: object | None = None) -> Generator[None]:
    """MCP calls made inside this block have their servers' requests answered by `handle`.

    `owner` groups blocks that may stand in for each other (see the module docstring); by
    default the block is its own owner.
    """
    answerer = Answerer(handle, owner if owner is not None else object())
    token = _answerer.set(answerer)
    try:
        yield
    finally:
        _answerer.reset(token)


@contextmanager
def on_server_log(handle: ServerLogHandler, *, owner: object | None = None) -> Generator[None]:
    """Log messages the servers of MCP calls made inside this block send during the call go
    to `handle` (besides the node's Python log).

    Blocks nest: a call's messages go to every enclosing block, outermost first. `owner` is as
    for `answering`; the outermost block's owner is the call's, for attribution.
    """
    listener = LogListener(handle, owner if owner is not None else object())
    token = _log_listeners.set((*_log_listeners.get(), listener))
    try:
        yield
    finally:
        _log_listeners.reset(token)


@dataclass(eq=False)
class InFlightCall:
    """One call a node has in flight, and who answers its server's requests."""

    answerer: Answerer | None
    on_waiting: Callable[[bool], None] | None = None
    """Told when the call starts (True) and stops (False) waiting on an answer: the node pauses
    the call's idle timeout meanwhile, since the server is waiting on us, not hung."""
    listeners: tuple[LogListener, ...] = ()
    """Who hears the server's log messages during the call (`on_server_log`)."""
    _waiting: int = field(default=0, repr=False)

    @property
    def log_owner(self) -> object | None:
        """Whom the call's log messages may be attributed to when the transport does not say."""
        if self.listeners:
            return self.listeners[0].owner
        return self.answerer.owner if self.answerer is not None else None

    @contextmanager
    def waiting(self) -> Generator[None]:
        """The call waits on an answer for the block (several may overlap)."""
        self._waiting += 1
        if self._waiting == 1 and self.on_waiting is not None:
            self.on_waiting(True)
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0 and self.on_waiting is not None:
                self.on_waiting(False)


_call: ContextVar[InFlightCall | None] = ContextVar("toolkits.mcp.call", default=None)


def refusal(request: InputRequest, reason: str) -> ErrorData:
    """The error a server receives for a request we cannot answer."""
    return ErrorData(code=mcp_types.INVALID_REQUEST, message=f"{request.method} refused: {reason}")


class CallsInFlight:
    """One node's calls in flight, for routing its server's requests to the right answerer."""

    def __init__(self, node: str) -> None:
        self._node = node
        self._calls: list[InFlightCall] = []

    @contextmanager
    def track(self, on_waiting: Callable[[bool], None] | None = None) -> Generator[InFlightCall]:
        """Hold a call in flight for the block, answered by the current `answering` block."""
        call = InFlightCall(_answerer.get(), on_waiting, _log_listeners.get())
        self._calls.append(call)
        token = _call.set(call)
        try:
            yield call
        finally:
            _call.reset(token)
            self._calls.remove(call)

    async def answer(self, request: InputRequest) -> InputResponse | ErrorData:
        """Answer a request of the node's server (see the module docstring)."""
        call = self._current()
        if call is None:
            found = self._attribute()
            if isinstance(found, str):
                return refusal(request, found)
            call = found
        if call.answerer is None:
            return refusal(
                request, "the call in flight was not made for an MCP client (e.g. an agent's call)"
            )
        with call.waiting():
            return await call.answerer.handle(request)

    async def relay_log(self, params: mcp_types.LoggingMessageNotificationParams) -> bool:
        """Hand a log message of the node's server to the listeners of the call it belongs to
        (see the module docstring); False when it belongs to no call or to an unknown one."""
        call = self._current()
        if call is None:
            owners = {call.log_owner for call in self._calls}
            if len(owners) != 1:  # no call in flight, or calls of several owners
                return False
            call = self._calls[-1]
        for listener in call.listeners:
            await listener.handle(params)
        return bool(call.listeners)

    def _current(self) -> InFlightCall | None:
        """The call of the running context, if it is one of this node's."""
        call = _call.get()
        return call if call is not None and any(call is mine for mine in self._calls) else None

    def _attribute(self) -> InFlightCall | str:
        """The call a request with no known origin belongs to, or why none can be chosen."""
        if not self._calls:
            return f"no call is in flight on MCP server {self._node!r}, so there is nobody to ask"
        owners = {call.answerer.owner if call.answerer else None for call in self._calls}
        if len(owners) > 1:
            return (
                f"calls of several clients are in flight on MCP server {self._node!r}, and its "
                "transport does not say which call this request belongs to"
            )
        return self._calls[-1]

    def client_callbacks(self) -> dict[str, Any]:
        """The SDK `Client` keyword arguments that declare the capabilities and route here."""

        async def sampling(
            _ctx: ClientRequestContext, params: mcp_types.CreateMessageRequestParams
        ) -> mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | ErrorData:
            request = mcp_types.CreateMessageRequest(params=params)
            answer = await self.answer(request)
            if isinstance(
                answer,
                mcp_types.CreateMessageResult | mcp_types.CreateMessageResultWithTools | ErrorData,
            ):
                return answer
            return refusal(request, "the client answered with something other than a message")

        async def elicitation(
            _ctx: ClientRequestContext, params: mcp_types.ElicitRequestParams
        ) -> mcp_types.ElicitResult | ErrorData:
            request = mcp_types.ElicitRequest(params=params)
            answer = await self.answer(request)
            if isinstance(answer, mcp_types.ElicitResult | ErrorData):
                return answer
            return refusal(request, "the client answered with something other than an ElicitResult")

        async def roots(_ctx: ClientRequestContext) -> mcp_types.ListRootsResult | ErrorData:
            request = mcp_types.ListRootsRequest()
            answer = await self.answer(request)
            if isinstance(answer, mcp_types.ListRootsResult | ErrorData):
                return answer
            return refusal(request, "the client answered with something other than its roots")

        return {
            "sampling_callback": sampling,
            # Declared with tools, so servers may offer sampling with tools to whoever is upstream.
            "sampling_capabilities": mcp_types.SamplingCapability(
                tools=mcp_types.SamplingToolsCapability()
            ),
            "elicitation_callback": elicitation,
            "list_roots_callback": roots,
        }
