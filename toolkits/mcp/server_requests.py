"""Requests a server sends its client during a call (sampling, elicitation, roots): who answers.

A node declares all three client capabilities to its server (so servers offer the tools that
need them) and answers on behalf of whoever made the call in flight: the caller's
`CallContext.answer`. Calls made without one (an agent's that has no model to ask, a CLI
call) have nobody to ask, and their servers' requests are refused.

Which call a request belongs to:

- On 2026-07-28 connections the requests come inside the call's own result (input-required
  rounds) and the SDK answers them in the calling task; over streamable HTTP it runs the
  callback in the context of the call whose response stream carried the request. Either way
  the call is known exactly (a context variable the node sets for the call's duration: the
  SDK's own context propagation is what tells the calls apart).
- Handshake-era stdio and SSE say nothing about it on the wire. Then the node looks at its calls
  in flight. If they all have one owner (`CallContext.owner`: one upstream client), that owner
  answers: its call that can (has `answer`, and declared the capability the request needs:
  `CallContext.answerable`), else its answerer refuses it, saying what its caller lacks (a
  call without `answer` refuses it as not made for a client). Calls of several owners make
  the request ambiguous, whatever each caller can answer: the request may be that of a caller
  that cannot, and it is refused rather than shown to the wrong client (the refusal says that
  nobody can answer it if none of them declared what it needs). A request while no call is in
  flight (a server syncing roots at startup) is refused.
- A caller that cannot say it gave up (a 2026-07-28 client between rounds: its SDK ends the
  call on its side when its own callback fails, and tells nobody) may leave its question open
  for good. So a request that only calls waiting on such callers' answers
  (`CallContext.yield_after`) make ambiguous, and that the one other caller can answer, waits:
  their questions are refused for them once open `yield_after` s, their calls end, and the
  request is attributed again. A caller that comes back in time is answered as before, and
  the request is then refused if still ambiguous.

A call that ends (done, cancelled, its client gone) withdraws the questions it is answering:
the server gets a refusal at once rather than when the answerer gives up, and the call no
longer counts for attributing the next request. A cancelled call waits (briefly) for those
answers to end (`InFlightCall.unwound`): ending, an answerer that relays to a client tells it
that its question is void, and over HTTP that must go before the call's own answer ends.

A URL-mode elicitation's completion (`notifications/elicitation/complete`, 2025-11-25), which
a server may send on any of its streams, goes by its id to the call whose caller was asked
that elicitation, while that call is in flight (`CallContext.on_elicitation_complete`): never to
another caller, and to nobody once the call ended.

Refusals are `ErrorData` the server receives as an MCP error whose message says why.

What is declared: a handshake-era node declares sampling, elicitation and roots once, for its
session. In the 2026-07-28 era a client's capabilities travel with each request, so a node of
that era tells its server, per call, only what the call's caller can answer
(`CallContext.answerable`; nothing for a call without `answer`, nor for a call passed through
whose caller cannot be asked: `_passed_through`); its own requests (lists, subscriptions) still
declare all three, so servers offer the tools that need them. A server then knows before it
asks, and a gateway in front of it can pass such calls straight through.

Log messages (`notifications/message`) a server sends during a call are attributed the same
way and go to the call's `CallContext.on_log`. An ambiguous or unattributable message goes to
nobody: the node writes every message to its Python log anyway. One sent while no call is in
flight is the node's own listeners' (`McpToolkit.subscribe_logs`).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types
from mcp.client.session import ClientRequestContext, ClientSession
from mcp_types import CLIENT_CAPABILITIES_META_KEY, ErrorData, InputRequest, InputResponse

from ..base import (
    CallContext,
    ElicitationCompleteHandler,
    ServerLogHandler,
    ServerRequestHandler,
)
from ..errors import AuthorizationRequired

__all__ = [
    "ASKING",
    "NOT_FOR_A_CLIENT",
    "UNWIND_SECONDS",
    "CallsInFlight",
    "InFlightCall",
    "Stamp",
    "refusal",
    "refused",
]

JsonObject = dict[str, Any]
Stamp = Callable[[JsonObject, Any], None]
"""The SDK session's stamp of a 2026-07-28 request: its `_meta` envelope, its headers."""
ASKING = ("sampling", "elicitation", "roots")
"""The client capabilities that let a server ask its client during a call."""
UNWIND_SECONDS = 2.0
"""How long a call that ended waits for the answers it gave up to end (`unwound`)."""


@dataclass(eq=False)
class InFlightCall:
    """One call a node has in flight, and who answers its server's requests."""

    answer: ServerRequestHandler | None
    on_log: ServerLogHandler | None
    owner: object | None
    """Whom the call's requests and log messages may be attributed to when the transport does
    not say (None: a call that neither answers nor listens)."""
    on_waiting: Callable[[bool], None] | None = None
    """Told when the call starts (True) and stops (False) waiting on an answer: the node pauses
    the call's idle timeout meanwhile, since the server is waiting on us, not hung."""
    failed_authorization: AuthorizationRequired | None = None
    """Set when the server asked for an authorization during the call that nobody gave
    (`oauth`): the call fails with it, whatever the SDK made of the refusal."""
    answerable: Mapping[str, Any] | None = None
    """What the caller answers, as client capabilities (`CallContext.answerable`); None: all."""
    refused: ErrorData | None = None
    """The last refusal of a request of the server during the call (the caller's, or ours
    for it): in input-required rounds the SDK client ends the call with it, as an `MCPError`
    that is no error of the server's."""
    on_elicitation_complete: ElicitationCompleteHandler | None = None
    """Where the completion of a URL-mode elicitation its caller was asked goes."""
    yield_after: float | None = None
    """How long its open question may hold up another caller's (`CallContext.yield_after`)."""
    gave_way: bool = False
    """Whether its questions were cut short for another caller's (`give_way`)."""
    elicitations: set[str] = field(default_factory=set[str], repr=False)
    """The ids of the URL-mode elicitations its caller was asked (`noting`)."""
    _waiting: int = field(default=0, repr=False)
    _waiting_since: float = field(default=0.0, repr=False)
    _answering: list[anyio.CancelScope] | None = field(default=None, repr=False)
    """The scopes of the answers under way: cancelled when the call ends."""
    _unwound: anyio.Event | None = field(default=None, repr=False)
    """Set when the last answer under way has ended (`unwound`)."""

    @contextmanager
    def waiting(self) -> Generator[None]:
        """The call waits on an answer for the block (several may overlap)."""
        self._waiting += 1
        if self._waiting == 1:
            self._waiting_since = anyio.current_time()
            if self.on_waiting is not None:
                self.on_waiting(True)
        try:
            yield
        finally:
            self._waiting -= 1
            if self._waiting == 0 and self.on_waiting is not None:
                self.on_waiting(False)

    @property
    def is_waiting(self) -> bool:
        """Whether the call waits on an answer now."""
        return self._waiting > 0

    @contextmanager
    def answering(self) -> Generator[None]:
        """The block answers a request of the server for the call (`waiting`), and is
        cancelled if the call ends meanwhile (`withdraw`): nobody waits for its answer then."""
        with anyio.CancelScope() as scope, self.waiting():
            answering = self._answering = self._answering or []
            answering.append(scope)
            try:
                yield
            finally:
                answering.remove(scope)
                if not answering and self._unwound is not None:
                    self._unwound.set()

    def noting(self, answer: ServerRequestHandler) -> ServerRequestHandler:
        """`answer`, noting the ids of the URL-mode elicitations put to it (before they are:
        the server may say one is complete before its client answers)."""

        async def noted(request: InputRequest) -> InputResponse | ErrorData:
            match request:
                case mcp_types.ElicitRequest(
                    params=mcp_types.ElicitRequestURLParams(elicitation_id=str() as named)
                ):
                    self.elicitations.add(named)
                case _:
                    pass
            return await answer(request)

        return noted

    @property
    def yields(self) -> bool:
        """Whether the call has questions open whose caller gives way (`yield_after`)."""
        return self.yield_after is not None and bool(self._answering)

    def give_way(self) -> float:
        """Another caller's question waits on this call's open ones (`yields`): they are
        refused for it once open `yield_after` s. Returns when (`anyio.current_time`)."""
        assert self.yield_after is not None
        assert self._answering
        self.gave_way = True
        deadline = self._waiting_since + self.yield_after
        for scope in self._answering:
            scope.deadline = min(scope.deadline, deadline)
        return deadline

    def withdraw(self) -> None:
        """The call ended: the answers under way for it are given up."""
        if self._answering:
            for scope in self._answering:
                scope.cancel()

    async def unwound(self) -> None:
        """Wait (shielded, at most `UNWIND_SECONDS`) until the answers the call gave up
        (`withdraw`) have ended. An answer may run in another task (the node's SDK session's),
        and its caller's client is told that its question is void as it ends: the call's own
        answer must not end before that (over HTTP, it ends the stream that says so)."""
        if not self._answering:
            return
        unwound = self._unwound = anyio.Event()
        with anyio.move_on_after(UNWIND_SECONDS, shield=True):
            await unwound.wait()


_call: ContextVar[InFlightCall | None] = ContextVar("toolkits.mcp.call", default=None)


NOT_FOR_A_CLIENT = "the call in flight was not made for an MCP client (e.g. an agent's call)"
"""Why a server's request during a call whose caller answers none is refused."""


def refusal(request: InputRequest, reason: str) -> ErrorData:
    """The error a server receives for a request we cannot answer."""
    return refused(request.method, reason)


def refused(method: str, reason: str) -> ErrorData:
    """The error a server receives for a request of `method` we cannot answer."""
    return ErrorData(code=mcp_types.INVALID_REQUEST, message=f"{method} refused: {reason}")


class CallsInFlight:
    """One node's calls in flight, for routing its server's requests to the right answerer."""

    def __init__(self, node: str) -> None:
        self._node = node
        self._calls: list[InFlightCall] = []
        self._ended: anyio.Event | None = None
        """Set when a call ends; made by a request waiting for calls to give way."""

    @contextmanager
    def track(
        self, context: CallContext | None, on_waiting: Callable[[bool], None] | None = None
    ) -> Generator[InFlightCall]:
        """Hold a call in flight for the block, for the caller `context` describes."""
        answer, on_log = (context.answer, context.on_log) if context else (None, None)
        owner = None
        if answer is not None or on_log is not None:
            owner = context.owner if context and context.owner is not None else object()
        # Nobody to answer: nothing to declare. Else what the caller says (None: all).
        answerable: Mapping[str, Any] | None = {}
        if context is not None and answer is not None:
            answerable = context.answerable
        call = InFlightCall(answer, on_log, owner, on_waiting, answerable=answerable)
        if answer is not None and context is not None:
            call.answer = call.noting(answer)
            call.on_elicitation_complete = context.on_elicitation_complete
            call.yield_after = context.yield_after
        self._calls.append(call)
        token = _call.set(call)
        try:
            yield call
        finally:
            _call.reset(token)
            self._calls.remove(call)
            call.withdraw()
            if self._ended is not None:
                self._ended.set()
                self._ended = None

    @property
    def idle(self) -> bool:
        """Whether no call is in flight."""
        return not self._calls

    def current_call(self) -> InFlightCall | None:
        """The call of the running context, if it is one of this node's."""
        return self._current()

    def asking_call(self, asks: str = "elicitation") -> InFlightCall | None:
        """The call whose caller a request of the node's own needing capability `asks` would
        be put to now (the one `answer` would choose), if that caller answers requests. The
        node's own requests are URL-mode elicitations (`oauth`)."""
        call = self._current()
        if call is None:
            found = self._attribute(asks)
            call = found if isinstance(found, InFlightCall) else None
        return call if call is not None and call.answer is not None else None

    async def answer(self, request: InputRequest) -> InputResponse | ErrorData:
        """Answer a request of the node's server (see the module docstring)."""
        call = self._current()
        if call is None:
            found = await self._attributed(_needs(request))
            if isinstance(found, str):
                return refusal(request, found)
            call = found
        if call.answer is None:
            answer: InputResponse | ErrorData = refusal(request, NOT_FOR_A_CLIENT)
        else:
            answer = await self._answered(call, call.answer, request)
        if isinstance(answer, ErrorData):
            call.refused = answer
        return answer

    async def _answered(
        self, call: InFlightCall, answer: ServerRequestHandler, request: InputRequest
    ) -> InputResponse | ErrorData:
        """`answer(request)` for `call`, withdrawn if the call ends first (`track`)."""
        with call.answering():
            return await answer(request)
        if call.gave_way and call in self._calls:
            return refusal(
                request,
                f"its client gave no answer within {call.yield_after:g} s, and another "
                f"caller's question to MCP server {self._node!r} waited on it",
            )
        return refusal(request, f"the call it came with on MCP server {self._node!r} ended")

    async def relay_log(self, params: mcp_types.LoggingMessageNotificationParams) -> bool:
        """Hand a log message of the node's server to the caller of the call it belongs to
        (see the module docstring); False when it belongs to no call or to an unknown one."""
        call = self._current()
        if call is None:
            owners = {id(call.owner) for call in self._calls}  # owners need not be hashable
            if len(owners) != 1:  # no call in flight, or calls of several owners
                return False
            call = self._calls[-1]
        if call.on_log is None:
            return False
        await call.on_log(params)
        return True

    async def elicitation_complete(self, elicitation_id: str) -> bool:
        """Hand the server's word that URL-mode elicitation `elicitation_id` is complete to the
        caller of the call in flight that was asked it; False if none was (its call ended)."""
        told = False
        for call in list(self._calls):
            if elicitation_id in call.elicitations and call.on_elicitation_complete is not None:
                await call.on_elicitation_complete(elicitation_id)
                told = True
        return told

    def declare_per_call(self, session: ClientSession) -> Stamp:
        """Make the 2026-07-28 `session` declare, on each request of a call of this node, only
        what the call's caller answers (see the module docstring). Returns its stamp for
        requests passed through (`_passed_through`)."""
        stamp: Stamp = session._stamp  # pyright: ignore[reportPrivateUsage]

        def per_call(data: JsonObject, options: Any) -> None:
            stamp(data, options)
            call = self._current()
            if call is not None and call.answerable is not None:
                meta = data["params"]["_meta"]
                meta[CLIENT_CAPABILITIES_META_KEY] = _declared(
                    meta[CLIENT_CAPABILITIES_META_KEY], call.answerable
                )

        session._stamp = per_call  # pyright: ignore[reportPrivateUsage]
        return _passed_through(stamp, self._current)

    def _current(self) -> InFlightCall | None:
        """The call of the running context, if it is one of this node's."""
        call = _call.get()
        return call if call is not None and any(call is mine for mine in self._calls) else None

    async def _attributed(self, asks: str) -> InFlightCall | str:
        """`_attribute`, once the calls whose open questions make the request ambiguous and
        give way (`InFlightCall.give_way`) have ended (see the module docstring)."""
        found = self._attribute(asks)
        if not isinstance(found, str):
            return found
        giving = [call for call in self._calls if call.yields]
        others = [call for call in self._calls if not call.yields]
        # Without them it must be unambiguous, and answerable: else nothing is gained.
        if not giving or _owners(others) != 1 or not any(_can(call, asks) for call in others):
            return found
        deadline = max(call.give_way() for call in giving)
        # Refused, a question ends its call soon: the wait beyond the deadline is for that.
        with anyio.move_on_after(deadline - anyio.current_time() + UNWIND_SECONDS):
            while any(call in self._calls for call in giving):
                ended = self._ended = self._ended or anyio.Event()
                await ended.wait()
        return self._attribute(asks)

    def _attribute(self, asks: str) -> InFlightCall | str:
        """The call a request with no known origin, needing client capability `asks`,
        belongs to, or why none can be chosen (see the module docstring)."""
        if not self._calls:
            return f"no call is in flight on MCP server {self._node!r}, so there is nobody to ask"
        able = [call for call in self._calls if _can(call, asks)]
        # Every caller counts, whatever it can answer: the request may be one that cannot,
        # and its prompt is then no other client's to see.
        callers = _owners(self._calls)
        if callers > 1 and not able:
            return (
                f"none of the clients with calls in flight on MCP server {self._node!r} "
                f"declared {asks}, so nobody can answer it"
            )
        if callers > 1:
            # Those waiting on their client's answer to an earlier question say why a caller
            # may seem to be alone: another's question is still open.
            waiting = _owners([call for call in self._calls if call.is_waiting])
            open_ = (
                f", {waiting} of them waiting on an answer to an earlier question"
                if waiting
                else ""
            )
            return (
                f"{callers} callers have calls in flight on MCP server {self._node!r}{open_}, "
                "and its transport does not say which call this request belongs to"
            )
        if able:
            return able[-1]
        # One caller that cannot answer: its answerer says what it lacks (none: not a client).
        askable = [call for call in self._calls if call.answer is not None]
        return (askable or self._calls)[-1]

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


def _needs(request: InputRequest) -> str:
    """The client capability (of `ASKING`) a caller must have declared to answer `request`."""
    match request:
        case mcp_types.CreateMessageRequest():
            return "sampling"
        case mcp_types.ElicitRequest():
            return "elicitation"
        case mcp_types.ListRootsRequest():
            return "roots"


def _can(call: InFlightCall, asks: str) -> bool:
    """Whether `call`'s caller answers requests needing client capability `asks`."""
    return call.answer is not None and (call.answerable is None or asks in call.answerable)


def _owners(calls: list[InFlightCall]) -> int:
    """How many owners `calls` have (owners need not be hashable)."""
    return len({id(call.owner) for call in calls})


def _passed_through(stamp: Stamp, current: Callable[[], InFlightCall | None]) -> Stamp:
    """`stamp` for requests passed through: the session's client capabilities with what the
    call's caller answers of `ASKING` (all of them for a caller that answers all), if the call
    is held among the node's calls (a caller that can be asked), else none of them."""
    last: list[JsonObject] = [{}, {}]  # the session's capabilities, and those without ASKING

    def declaring(data: JsonObject, options: Any) -> None:
        stamp(data, options)
        meta = data["params"]["_meta"]
        declared = meta[CLIENT_CAPABILITIES_META_KEY]
        call = current()
        if call is not None and call.answerable is None:
            return  # its caller answers all that the session declares
        if call is not None and call.answerable:
            meta[CLIENT_CAPABILITIES_META_KEY] = _declared(declared, call.answerable)
            return
        if declared is not last[0]:  # the session stamps the same object each time
            last[:] = declared, _declared(declared, {})
        meta[CLIENT_CAPABILITIES_META_KEY] = last[1]

    return declaring


def _declared(capabilities: JsonObject, answerable: Mapping[str, Any]) -> JsonObject:
    """`capabilities` with only the `ASKING` ones that `answerable` names too, as it names them."""
    kept = {key: value for key, value in capabilities.items() if key not in ASKING}
    for key in ASKING:
        if key in capabilities and key in answerable:
            kept[key] = answerable[key]
    return kept
