"""A tool call passed through: raw JSON-RPC on the connection a node keeps to its server.

A gateway relaying a call it does not change needs none of the SDK client's per-request
machinery (memory streams, tasks, models for every message). `Forward.call` sends the request
on the node's live connection and returns the result as the server sent it, JSON,
checked but not rebuilt. On the way, as `McpToolkit.call_tool` would: progress restarts the
clock and goes to the caller, log messages go to the caller, the server's own requests are
answered by the caller (`answer`; pings by us), its other notifications go to the node, a
timeout or a cancelled caller cancels the request at the server, and a connection lost
mid-call is reported and reconnected.

How a request goes out and its messages come back is the `Channel`'s: a streamable HTTP
connection's (`forward_http`: a handshake-era session, or 2026-07-28 requests), or a stdio
server's pipe (`stdio_pipe`). Over HTTP the server's requests and log messages come on the
call's own response, or on a handshake-era session's own stream; there and over stdio
nothing says which call they belong to, so they go to the node's SDK session, and the call
is held in flight among the node's calls (`server_requests`) to be attributed as any other
call would be. A 2026-07-28 server asks its questions in the
result instead (input-required rounds): the SDK's own driver takes them to the caller, as the
SDK client does, having declared to the server only what the caller answers.

`McpToolkit.forward(name)` offers one when the node's connection can carry it; `call` returns
None when the request never reached the server (the session was gone), so the caller can
take the usual path with nothing done twice. `call_for` is the same call for a caller as
`McpToolkit.call_tool` takes one (a `CallContext`), the result as the SDK client returns it:
the node's own calls go this way too, at a fifth of the SDK client's CPU.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Mapping
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    contextmanager,
    nullcontext,
)
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

import anyio
import mcp_types
from mcp.client._input_required import (  # the SDK client's own rounds, for the same answers
    InputRequiredRoundsExceededError,
    run_input_required_driver,
)
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CallToolResult,
    ErrorData,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    InputResponses,
)
from pydantic import ValidationError

from ..base import (
    CallContext,
    ElicitationCompleteHandler,
    ServerRequestHandler,
    error_result,
    validation_brief,
)
from ..errors import ConnectionLost
from ..nesting import TooDeep
from ..well_formed import well_formed_result
from .call_failures import cut_short, stray_answer, too_deep_text, too_large
from .connection import Connection, connection_lost
from .deadline import Deadline, timed_out
from .error_text import error_text, protocol_error_result
from .event_stream import AnswerTooLarge
from .plain_result import is_plain_text
from .server_requests import NOT_FOR_A_CLIENT, CallsInFlight, InFlightCall, refused

__all__ = [
    "Channel",
    "ChannelLost",
    "Forward",
    "call_for",
    "cut_short",
    "readable_result",
    "still_there",
    "too_deep_text",
    "too_large",
]

JsonObject = dict[str, Any]
OnProgress = Callable[[float, float | None, str | None], Awaitable[None]]
OnLog = Callable[[JsonObject], Awaitable[None]]

_ids = itertools.count(1)
_CANCEL_SECONDS = 2.0
"""How long telling the server that a call was cancelled may take."""
_PROBE_SECONDS = 5.0
"""How long the server may take to answer the request that tells whether it is still there."""


class ChannelLost(Exception):
    """The connection failed after the request went out."""


class StrayAnswer(Exception):
    """The server answered a call's request with an id no request has: that answer is not
    the call's, and the call's will not come on its messages."""

    def __init__(self, answer_id: object) -> None:
        super().__init__(answer_id)
        self.answer_id = answer_id


class Channel(Protocol):
    """How a passed-through request reaches the server and its messages come back."""

    def exchange(
        self, request_id: str, request: JsonObject
    ) -> AbstractAsyncContextManager[AsyncIterator[JsonObject] | None]:
        """Send `request` (the JSON-RPC request `request_id`; the channel may add what its
        protocol era needs); the block gets the server's messages about it, up to its answer
        (they end early if the connection closed), or None if the request never reached the
        server. Iterating raises `ChannelLost` when the connection fails, `ValueError` for a
        message that is not JSON-RPC."""
        ...

    async def post(self, message: JsonObject) -> None:
        """Send a message of ours (an answer, a cancellation); a failure is logged only."""
        ...


@dataclass(frozen=True, slots=True)
class Forward:
    """One tool of a node, callable as raw JSON-RPC on the node's live session."""

    node: str
    tool: str
    """The name the caller knows the tool by (in errors)."""
    original: str
    """The server's own name for it."""
    conn: Connection
    channel: Channel
    timeout: float
    cap: float
    on_notification: Callable[[JsonObject], Awaitable[None]]
    note_log: Callable[[JsonObject], None] | None = None
    """Writes a log message the server sent among the call's own messages to the node's log
    (those on its session's stream reach the node's SDK session, which writes them)."""
    calls: CallsInFlight | None = None
    """The node's calls, where the server's requests and log messages may reach the node's SDK
    session rather than the channel: the call is held among them meanwhile."""
    probe: bool = False
    """Whether a request's connection failing mid-call is checked against the session
    (`still_there`) before it counts as the server gone: over HTTP each request has a
    connection of its own, and a proxy may cut one while the server serves the others."""
    says_which_call: bool = False
    """Whether the channel brings everything the server sends about a call on the call's own
    response (2026-07-28 HTTP, which has no stream of the session's own): nothing of unknown
    origin reaches `calls`, so a call is held there only if its caller can be asked (where
    the connection's stamp finds what the caller answers). A handshake-era HTTP session may
    ask and log on its own stream, of unknown origin: every call is held, so that a caller
    that cannot answer still makes such a request ambiguous, as on the usual path."""

    async def call(
        self,
        arguments: Mapping[str, Any],
        *,
        meta: Mapping[str, Any],
        on_progress: OnProgress,
        on_log: OnLog,
        answer: ServerRequestHandler,
        answerable: Mapping[str, Any] | None = None,
        owner: object | None = None,
        scope: anyio.CancelScope | None = None,
        on_elicitation_complete: ElicitationCompleteHandler | None = None,
        yield_after: float | None = None,
    ) -> JsonObject | None:
        """The `CallToolResult` as the server sent it; None if the request never reached the
        server. Raises `ConnectionLost`, `ToolTimeout`, and `MCPError` for the server's
        JSON-RPC error, as the SDK client does (a question of an input-required round refused
        ends the call with an error result: it is no error of the server's).
        `answer` takes the server's requests (sampling, elicitation, roots) meanwhile;
        `answerable`: which of them it may answer, as client capabilities (empty: it only
        refuses them; a 2026-07-28 server is told so with the request; None: all that the
        node declares).
        `owner`: the caller's client, whose calls may take each other's server requests and
        log messages where the channel cannot tell them apart (`CallContext.owner`).
        `scope`: a cancel scope the caller entered around the call, for the call's clock to
        run on instead of a scope of its own (`Deadline`); a timeout raises out of it.
        `on_elicitation_complete`: told when the server says a URL-mode elicitation `answer`
        was put is complete (`CallContext.on_elicitation_complete`).
        `yield_after`: how long its open question may hold up another caller's
        (`CallContext.yield_after`).
        """
        deadline = Deadline(self.timeout, self.cap, scope)
        exchange = _Exchange(self, meta, on_progress, on_log, answer, deadline)
        params: JsonObject = {"name": self.original, "arguments": dict(arguments)}
        held: InFlightCall | None = None
        try:
            with (
                deadline.scope if scope is None else nullcontext(),
                self._in_flight(
                    deadline,
                    on_log,
                    answer,
                    answerable,
                    (owner, on_elicitation_complete, yield_after),
                ) as held,
            ):
                if held is not None and held.answer is not None:
                    exchange.answer = held.answer  # it notes the elicitations' ids
                message = await exchange.send(params)
                if message is None:
                    return None
                _authorized(held)
                if (asking := _input_required(message)) is not None:
                    try:
                        message = await exchange.rounds(asking, params)
                    except MCPError as exc:  # a question refused: no error of the server's
                        return _dump(error_result(error_text(exc.code, exc.message)))
                return self._result(message)
        except ChannelLost as exc:
            _authorized(held)
            if self.probe and await still_there(self.conn):
                return _dump(error_result(cut_short(self.node, self.tool)))
            raise self._lost() from exc
        except AnswerTooLarge as exc:  # the call fails, the session stays
            return _dump(error_result(too_large(self.node, exc.limit, exc.size)))
        except StrayAnswer as exc:  # so does this one, at once
            return _dump(error_result(stray_answer(self.node, exc.answer_id)))
        except TooDeep as exc:  # so does this one (`nesting`)
            return _dump(error_result(too_deep_text(self.node, exc.in_message())))
        except ValueError as exc:  # not JSON: the call fails, the session stays
            _authorized(held)
            return _dump(error_result(f"MCP server {self.node!r} sent a malformed answer: {exc}"))
        except InputRequiredRoundsExceededError as exc:
            return _dump(error_result(str(exc)))
        except anyio.get_cancelled_exc_class():
            if scope is None or not deadline.expired:
                if held is not None:
                    await held.unwound()  # its client told of its questions withdrawn first
                await self._cancel(exchange.request_id, "the caller cancelled the call")
                raise
            # The clock ran out on the caller's scope: a timeout, as below.
        finally:
            if scope is not None:
                deadline.stop()
        # Every other way out returns or raises.
        assert scope is not None or deadline.scope.cancelled_caught
        await self._cancel(exchange.request_id, "timed out")
        raise timed_out(deadline, self.tool, self.node)

    def _in_flight(
        self,
        deadline: Deadline,
        on_log: OnLog,
        answer: ServerRequestHandler,
        answerable: Mapping[str, Any] | None,
        caller: tuple[object | None, ElicitationCompleteHandler | None, float | None],
    ) -> AbstractContextManager[InFlightCall | None]:
        """`caller`: who the call is for (its `owner`, `on_elicitation_complete` and
        `yield_after`), made a `CallContext` only for a call held (off the hot path)."""
        if self.calls is None or (self.says_which_call and answerable == {}):
            return nullcontext()
        owner, on_complete, yield_after = caller
        context = CallContext(
            answerable=answerable,
            owner=owner,
            on_elicitation_complete=on_complete,
            yield_after=yield_after,
        )
        return _held(self.calls, deadline, on_log, answer, context)

    def _result(self, message: JsonObject) -> JsonObject:
        error = message.get("error")
        if isinstance(error, dict):
            try:
                sent = ErrorData.model_validate(error)
            except ValidationError as exc:
                said = validation_brief(exc, "the error")
                return _dump(
                    error_result(f"MCP server {self.node!r} sent a malformed error: {said}")
                )
            raise MCPError.from_error_data(sent)
        result = message.get("result")
        if is_plain_text(result):
            return cast(JsonObject, result)  # what the check below takes as it is
        # A result that breaks the tool's own output schema is still the server's: relayed as
        # it is (the client may check it), and a model reads what the tool said.
        try:
            mcp_types.CallToolResult.model_validate(result)
        except ValidationError as exc:
            said = validation_brief(exc, "the result")
            return _dump(error_result(f"MCP server {self.node!r} sent a malformed result: {said}"))
        return cast(JsonObject, result)

    async def handle_message(
        self,
        message: JsonObject,
        request_id: str,
        deadline: Deadline,
        on_progress: OnProgress,
        on_log: OnLog,
        answer: ServerRequestHandler,
    ) -> None:
        """What the server sends about request `request_id` besides its answer: progress, log
        messages and notifications passed on, its own requests answered."""
        method = message.get("method")
        if not isinstance(method, str):
            return  # an answer to something else: not ours to read
        params = message.get("params")
        fields = cast(JsonObject, params) if isinstance(params, dict) else {}
        if "id" in message:
            await self._answer(message, method, answer, deadline)
        elif method == "notifications/progress":
            if fields.get("progressToken") == request_id:
                deadline.alive()
                progress, total = fields.get("progress"), fields.get("total")
                if isinstance(progress, int | float):
                    total = total if isinstance(total, int | float) else None
                    said = fields.get("message")
                    await on_progress(progress, total, said if isinstance(said, str) else None)
        elif method == "notifications/message":
            if self.note_log is not None:
                self.note_log(fields)
            await on_log(fields)
        else:
            await self.on_notification(message)

    async def _answer(
        self, request: JsonObject, method: str, answer: ServerRequestHandler, deadline: Deadline
    ) -> None:
        reply: JsonObject = {"jsonrpc": "2.0", "id": request["id"]}
        if method == "ping":
            reply["result"] = {}
        else:
            answered = await _asked(request, method, answer, deadline)
            key = "error" if isinstance(answered, ErrorData) else "result"
            reply[key] = answered.model_dump(mode="json", by_alias=True, exclude_none=True)
        await self.channel.post(reply)

    async def _cancel(self, request_id: str, reason: str) -> None:
        note = {"requestId": request_id, "reason": reason}
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CANCEL_SECONDS):
            await self.channel.post(
                {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": note}
            )

    def _lost(self) -> ConnectionLost:
        return connection_lost(
            self.node, self.conn, f"the connection closed during a call to {self.tool!r}"
        )


@dataclass(slots=True)
class _Exchange:
    """The requests of one call passed through: the first, and those of its input-required
    rounds (2026-07-28), each with an id of its own."""

    forward: Forward
    meta: Mapping[str, Any]
    on_progress: OnProgress
    on_log: OnLog
    answer: ServerRequestHandler
    deadline: Deadline
    request_id: str = ""
    """The request in flight (the one a cancellation names)."""

    async def send(self, params: JsonObject) -> JsonObject | None:
        """The server's answer to a `tools/call` with `params`; None if the request never
        reached the server. Raises `ChannelLost` if the messages end without the answer,
        `StrayAnswer` for an answer to no request of ours."""
        request_id = self.request_id = f"agent-gateway-{next(_ids)}"
        request = {
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "tools/call",
            # A token of ours whether or not the caller asked for progress: the server's
            # progress keeps the call's clock alive (`Deadline.alive`) as on the usual path;
            # the caller's own token, if any, is what it hears it under (`on_progress`).
            "params": {**params, "_meta": {**self.meta, "progressToken": request_id}},
        }
        forward = self.forward
        async with forward.channel.exchange(request_id, request) as messages:
            if messages is None:
                return None
            async for message in messages:
                if "method" not in message:
                    if message.get("id") == request_id:
                        return message
                    if "jsonrpc" in message and "id" in message:  # not an HTTP error's body
                        raise StrayAnswer(message["id"])  # on the call's own messages
                await forward.handle_message(
                    message, request_id, self.deadline, self.on_progress, self.on_log, self.answer
                )
        raise ChannelLost("the messages ended without the answer")

    async def rounds(self, first: JsonObject, params: JsonObject) -> JsonObject:
        """The answer that ends the input-required rounds `first` opens: each question of the
        server put to the caller by the SDK client's own driver (a refusal ends the rounds
        with an `MCPError`, as on the usual path)."""
        last: JsonObject = {}

        async def dispatch(key: str, request: InputRequest) -> InputResponse | ErrorData:
            del key
            return await _waited_on(self.answer, request, self.deadline)

        async def retry(
            responses: InputResponses | None, state: str | None
        ) -> mcp_types.CallToolResult | InputRequiredResult:
            again = dict(params)
            if responses is not None:
                again["inputResponses"] = {
                    key: response.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for key, response in responses.items()
                }
            if state is not None:
                again["requestState"] = state
            answer = await self.send(again)
            if answer is None:
                raise ChannelLost("the server could not be reached for the next round")
            last.clear()
            last.update(answer)
            if (asking := _input_required(answer)) is not None:
                return InputRequiredResult.model_validate(asking, by_name=False)
            # The rounds are over: the answer (a result, or an error) is read from `last`.
            return mcp_types.CallToolResult(content=[])

        opened = InputRequiredResult.model_validate(first, by_name=False)
        await run_input_required_driver(opened, dispatch=dispatch, retry=retry)
        return last


async def call_for(
    forward: Forward, arguments: Mapping[str, Any], context: CallContext | None
) -> mcp_types.CallToolResult | None:
    """`forward.call` for the caller `context` describes, as `McpToolkit.call_tool` serves it;
    None if the request never reached the server. Raises what `Forward.call` raises."""
    context = context or CallContext()
    on_log = context.on_log

    async def server_log(fields: JsonObject) -> None:
        if on_log is None:
            return
        try:
            params = mcp_types.LoggingMessageNotificationParams.model_validate(fields)
        except ValidationError:
            return  # as the SDK client drops a malformed notification
        await on_log(params)

    asks = context.answer
    try:
        result = await forward.call(
            arguments,
            meta=context.meta or {},
            on_progress=context.on_progress or _unheard,
            on_log=server_log,
            answer=asks or _nobody_asked,
            answerable={} if asks is None else context.answerable,
            owner=context.owner,
            on_elicitation_complete=context.on_elicitation_complete,
            yield_after=context.yield_after,
        )
    except MCPError as exc:  # as `McpToolkit.call_tool` takes it from the SDK client
        return protocol_error_result(exc.error)
    return None if result is None else mcp_types.CallToolResult.model_validate(result)


async def still_there(conn: Connection) -> bool:
    """Whether `conn`'s server still answers on its session, after one request's own HTTP
    connection failed: then that call failed alone. Asked with a listing's first page through
    the SDK client (every server answers it; 2026-07-28 has no ping)."""
    client = conn.client
    if client is None or conn.lost is not None:
        return False
    with anyio.move_on_after(_PROBE_SECONDS):
        try:
            await client.list_tools()
        except ValidationError:  # a page the SDK refuses (`tool_listing`) is an answer too
            pass
        except Exception:  # MCPError, or the transport failed: it is gone
            return False
        return conn.lost is None
    return False


def readable_result(result: CallToolResult, server: str | None, tool: str) -> CallToolResult:
    """`result` as a gateway reads, prints, stores and sends it to models: text UTF-8 can
    carry (`well_formed_result`), nested no deeper than a reader or writer on the way takes;
    else its error (`server`: the MCP server that sent it, None for a local tool)."""
    try:
        return well_formed_result(result)
    except TooDeep as exc:
        if server is not None:
            return error_result(too_deep_text(server, exc))
        return error_result(f"tool {tool!r} returned a result {exc}")


async def _unheard(progress: float, total: float | None, message: str | None) -> None:
    del progress, total, message


async def _nobody_asked(request: InputRequest) -> ErrorData:
    return refused(request.method, NOT_FOR_A_CLIENT)


@contextmanager
def _held(
    calls: CallsInFlight,
    deadline: Deadline,
    on_log: OnLog,
    answer: ServerRequestHandler,
    caller: CallContext,
) -> Generator[InFlightCall]:
    """The call held among the node's calls: the server's requests meanwhile go to `answer`,
    its log messages to `on_log`, and the clock stops while the server waits on an answer,
    as for a call on the usual path."""

    async def relay_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        await on_log(params.model_dump(mode="json", by_alias=True, exclude_none=True))

    context = replace(caller, on_log=relay_log, answer=answer)
    with calls.track(context, deadline.waiting) as call:
        yield call


def _authorized(held: InFlightCall | None) -> None:
    """Raise the `AuthorizationRequired` the node's auth flow gave the call (`oauth`), if it
    did: the server refused the request unread, and the caller is told what to do, as the
    SDK client's way tells it (`McpToolkit.call_tool`), not what the refusal looked like."""
    if held is not None and held.failed_authorization is not None:
        raise held.failed_authorization


_ASKS = (
    mcp_types.CreateMessageRequest,
    mcp_types.ElicitRequest,
    mcp_types.ListRootsRequest,
)


async def _asked(
    request: JsonObject, method: str, answer: ServerRequestHandler, deadline: Deadline
) -> InputResponse | ErrorData:
    """The caller's answer to a request the server sent on the call's messages."""
    try:
        typed = mcp_types.server_request_adapter.validate_python(request, by_name=False)
    except ValidationError:
        return refused(method, "the request is malformed")
    if not isinstance(typed, _ASKS):
        return refused(method, f"the upstream client cannot answer {method}")
    return await _waited_on(answer, typed, deadline)


async def _waited_on(
    answer: ServerRequestHandler, request: InputRequest, deadline: Deadline
) -> InputResponse | ErrorData:
    """`answer(request)`, the call's clock stopped meanwhile: the server waits on us."""
    deadline.waiting(True)
    try:
        return await answer(request)
    finally:
        deadline.waiting(False)


def _input_required(message: JsonObject) -> JsonObject | None:
    """The result of `message` if it asks for input (2026-07-28 rounds)."""
    result = message.get("result")
    if not isinstance(result, dict):
        return None
    fields = cast(JsonObject, result)
    return fields if fields.get("resultType") == "input_required" else None


def _dump(result: mcp_types.CallToolResult) -> JsonObject:
    """A result of ours as a server sends it: without the SDK's `resultType`, a field of the
    2026-07-28 era alone (the client's era adds it where it has one)."""
    return result.model_dump(mode="json", by_alias=True, exclude_none=True, exclude={"result_type"})
