"""The agents as an OpenAI-compatible Chat Completions API, beside `/mcp` on `serve --http`.

`GET /v1/models` lists the agents (a model id is an agent's name); `POST /v1/chat/completions`
with `model` naming one runs it on the request's last user message, the messages before it
as the conversation so far (`openai_wire`): answered whole (`chat.completion`, with `usage`)
or, with `stream: true`, as server-sent `chat.completion.chunk` deltas while the agent's
model writes (its agent tools' text is not the answer, an agent's it handed the conversation
to is: `answer_text`), a last chunk with
`finish_reason`, a usage chunk when `stream_options.include_usage`, then `data: [DONE]`. The
agent runs its tools itself; the client sees none of its calls. A structured answer (an
agent with an output schema) is not streamed as written: the JSON its schema's check made is
sent at the end, as whole. A stream with nothing to send for `keep_alive` seconds (tools run)
gets an SSE comment, so that a proxy in front does not cut it.

The same rules as `/mcp` hold: the HTTP app's Host/Origin checks, CORS and bearer tokens (a
request the token middleware let through unauthenticated gets 401 here, in OpenAI's error
shape), an OAuth token's scopes (an agent it may not call is neither listed nor run: 403),
the client's share of the nodes (`ClientQuotas`, by principal or address, as a 2026-07-28
MCP client's), the body size limit, and the server's calls in flight (refused while it
stops, ended at the end of its grace). With a run store the run is stored, as an MCP call's
is, and its failure, or its end by the stopping server, is told in an MCP client's words
(`run_failures`). A client that disconnects cancels the run, and a stored run stays stored, resumable, as
when an MCP client cancels its call.

A run that fails is answered 500 with `x-should-retry: false` (OpenAI's SDKs would otherwise
run the agent, and its tools, twice more); a conversation over the model's context window 400
`context_length_exceeded` (`param: "messages"`, as OpenAI says it: its clients trim the
conversation and ask again), the cause typed on the item (`ItemResult.error_code`), never read
from its words. A stream begins (its headers, the role chunk) once a model call of the run
answered, or with the first thing it sends: a run that fails before is answered as one not
streamed, with its status; after, its failure is the stream's last event, an `error`. An answer
cut at a token limit (the model's `max_tokens`, the agent's `token_budget`) is no failure:
the text so far, `finish_reason: "length"`.

A request that comes from a gateway's agent says how deep its run is (`HOPS_HEADER`, which
every model request of a run sends); one at the depth limit is refused (400), so gateways
whose agents are each other's models (or their own) end the loop, as MCP calls' `_meta` does.
A request's W3C trace context (`traceparent`, `tracestate`, `baggage` headers, which a
gateway's model requests send) is its run's caller's trace, as an MCP call's `_meta` is.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from starlette.types import Message, Receive, Scope, Send

from agent import AgentError, Usage
from agent.stopped import cut_off
from toolkits import ToolkitError

from ..approval import NOT_STORED, ApprovalRequest
from ..engine import AgentSpec, Gateway
from ..errors import DepthExceeded, GatewayError
from ..item_results import text_before_calls
from ..model_specs import ClientSampling
from ..run_context import HOPS_HEADER, budget_spent
from ..run_state import RunResult, RunState
from ..trace import TRACE_CONTEXT_KEYS, new_id, trace_context_in
from .notifications.answer_text import AnswerText
from .notifications.run_progress import HEARTBEAT_SECONDS
from .openai_wire import ApiError, ChatRequest, chunk, completion, read_request
from .running_calls import RunningCalls
from .served.run_failures import item_failed, note_stored, stopped, stored_failure
from .served.stored_runs import StoredAgentRuns, handle_result
from .serving import ClientQuotas, caller_of
from .transports.auth import ScopePolicy, authenticated_subject
from .transports.request_headers import first

__all__ = ["ChatCompletions"]

log = logging.getLogger(__name__)

_MODELS = "/v1/models"
_COMPLETIONS = "/v1/chat/completions"
_MAX_DIGITS = 9
"""The longest hop count read (`int` refuses over 4300 digits; any depth limit is far less)."""
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # nginx passes each chunk on as it comes
]


class ChatCompletions:
    """ASGI app for `/v1/...`: the gateway's agents to OpenAI clients."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        running: RunningCalls,
        stored: StoredAgentRuns | None = None,
        policy: ScopePolicy | None = None,
        required_scopes: Sequence[str] = (),
        max_request_bytes: int = 4 * 1024 * 1024,
        keep_alive: float = HEARTBEAT_SECONDS,
    ) -> None:
        self._gateway = gateway
        self._running = running
        self._stored = stored
        self._policy = policy
        self._required = tuple(required_scopes)
        self._max_bytes = max_request_bytes
        self._keep_alive = keep_alive
        self._since = int(time.time())
        """When the agents began to be served: each model's `created`."""
        self._quotas = ClientQuotas()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        try:
            self._check_token(scope)
            path, method = scope["path"].rstrip("/"), scope["method"]
            if path == _MODELS and method == "GET":
                await _send_json(send, 200, await self._models(scope))
            elif path.startswith(_MODELS + "/") and method == "GET":
                name = path.removeprefix(_MODELS + "/")
                spec = await self._agent(scope, name)
                await _send_json(send, 200, _model(spec.name, self._since))
            elif path == _COMPLETIONS and method == "POST":
                await self._complete(scope, receive, send)
            elif path in (_COMPLETIONS, _MODELS) or path.startswith(_MODELS + "/"):
                allow = b"POST" if path == _COMPLETIONS else b"GET"
                raise ApiError(
                    405,
                    f"{method} {path} is not served ({allow.decode()} is)",
                    code="method_not_allowed",
                    headers=[(b"allow", allow)],
                )
            else:
                raise ApiError(404, f"{path} is not served here", code="not_found")
        except ApiError as exc:
            await _send_error(send, exc)

    def _check_token(self, scope: Scope) -> None:
        """What the bearer tokens ask of `/mcp` (`challenges.RequireToken`), said OpenAI's way.
        No `user` in the scope: the app takes no tokens (a loopback address)."""
        if "user" not in scope:
            return
        user = scope["user"]
        if not isinstance(user, AuthenticatedUser):
            raise ApiError(
                401,
                "a valid bearer token is required (Authorization: Bearer ...)",
                type="authentication_error",
                code="invalid_api_key",
            )
        missing = [name for name in self._required if name not in user.scopes]
        if missing:
            raise ApiError(
                403,
                f"the token lacks the required scope {' '.join(missing)}",
                type="permission_error",
                code="insufficient_scope",
            )

    async def _models(self, scope: Scope) -> dict[str, Any]:
        names = [spec.name for spec in self._gateway.agents.values() if _served(spec)]
        allowed = [name for name in names if await self._refusal(scope, name) is None]
        return {"object": "list", "data": [_model(name, self._since) for name in allowed]}

    async def _refusal(self, scope: Scope, agent: str) -> str | None:
        """Why the caller's OAuth token may not call `agent` (its scopes); None if it may."""
        user = scope.get("user")
        if self._policy is None or not isinstance(user, AuthenticatedUser):
            return None
        access = user.access_token
        if not self._policy.restricts(access):
            return None
        refused = await self._policy.refusal(access, "tools/call", {"name": agent})
        return refused.message if refused is not None else None

    async def _agent(self, scope: Scope, name: str) -> AgentSpec:
        spec = self._gateway.agents.get(name)
        if spec is None:
            # Those the caller may call, as /v1/models lists them: no more.
            known = ", ".join(model["id"] for model in (await self._models(scope))["data"])
            raise ApiError(
                404,
                f"the model {name!r} does not exist: a model is an agent of this gateway "
                f"({known or 'none'})",
                code="model_not_found",
                param="model",
            )
        if not _served(spec):
            raise ApiError(
                400,
                f'agent {name!r} runs on its MCP client\'s own model (model = "sampling"), '
                "which an OpenAI client cannot be: call it over MCP",
                param="model",
            )
        refused = await self._refusal(scope, name)
        if refused is not None:
            raise ApiError(403, refused, type="permission_error", code="insufficient_scope")
        return spec

    async def _complete(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = await _body(receive, self._max_bytes)
        if body is None:  # the client left before it asked
            return
        request = read_request(body)
        spec = await self._agent(scope, request.agent)
        hops = self._hops(scope)
        gone = anyio.Event()
        reply = _Reply(send, request, new_id(), self._keep_alive)
        async with anyio.create_task_group() as tg:
            tg.start_soon(_watch_disconnect, receive, gone, tg.cancel_scope)
            ended = await self._running.answer(
                partial(self._answer, scope, spec, request, reply, gone, hops), _ended
            )
            if ended is not None:  # the server stops: it ended the run, or began none
                await reply.fail(ApiError(503, ended, type="server_error", code="unavailable"))
            tg.cancel_scope.cancel()  # answered: stop listening for a disconnect

    def _hops(self, scope: Scope) -> int:
        """How deep the request comes (`HOPS_HEADER`: sent by a gateway whose agent has this
        one's agent as its model, or one of its own agents); refused at the depth limit, as
        an MCP call with as many hops is."""
        raw = first(scope, HOPS_HEADER.encode())
        if raw is None:
            return 0
        said = raw.decode("latin-1").strip()
        hops = _count(said)
        if hops is None:
            raise ApiError(400, f"the {HOPS_HEADER} header is not a count of hops: {said[:40]!r}")
        try:
            self._gateway.check_hops(hops)
        except DepthExceeded as exc:
            raise ApiError(400, f"{exc} ({HOPS_HEADER}: {hops})", code="max_depth") from None
        return hops

    async def _answer(
        self,
        scope: Scope,
        spec: AgentSpec,
        request: ChatRequest,
        reply: _Reply,
        gone: anyio.Event,
        hops: int,
    ) -> None:
        state = RunState(
            run_id=reply.run_id,
            agent=spec.name,
            items=[request.item],
            started_by=authenticated_subject(),
            origin=self._stored.origin if self._stored is not None else None,
            caller_trace=_caller_trace(scope),
        )
        quota = self._quotas.of_caller(caller_of(scope), self._gateway)
        shaped = [
            name for name, agent in self._gateway.agents.items() if agent.options.output is not None
        ]
        text = AnswerText(
            reply.delta, shaped=shaped, whole=spec.name in shaped, on_answered=reply.begin
        )
        outcome: RunResult | list[ApprovalRequest] | ApiError
        async with reply.streaming():
            try:
                if self._stored is not None:
                    # What its client can do if the server ends it.
                    note_stored(self._stored, state.run_id)
                    outcome = await self._stored.start(
                        state, follower=text, hops=hops, quota=quota, asker=None, stop=gone
                    )
                else:
                    hooks = [text] if request.stream else []
                    outcome = await self._gateway.resume(
                        state,
                        hooks=hooks,
                        hops=hops,
                        quota=quota,
                        stream=request.stream,
                        approver=NOT_STORED,  # no store to wait in, no client to ask
                    )
            except (AgentError, GatewayError, ToolkitError) as exc:
                if self._stored is None:
                    outcome = _failed(stopped(spec.name, exc))
                else:  # told as the store has it, as to an MCP client (how to resume: logged)
                    ended = await stored_failure(self._stored, spec.name, state.run_id, exc)
                    outcome = _failed(_text_of(ended))
            except Exception as exc:  # a bug: answered, logged, the server serves on
                log.exception("agent %r crashed", spec.name)
                outcome = _failed(f"agent {spec.name!r} failed: {type(exc).__name__}: {exc}")
        if isinstance(outcome, ApiError):
            await reply.fail(outcome)
        elif isinstance(outcome, list):  # a stored run waits for a person's approval
            assert self._stored is not None
            spent = Usage.model_validate(await self._stored.usage_so_far(state.run_id))
            self._stored.showing(state.run_id, outcome)
            await reply.waiting(outcome, spent, text)
        else:
            await reply.finish(outcome, text, stored=self._stored is not None)


def _caller_trace(scope: Scope) -> dict[str, str] | None:
    """The W3C trace context the request's headers carry (`traceparent`, `tracestate`,
    `baggage`), for its run to continue, as an MCP call's `_meta` is."""
    sent = {key: first(scope, key.encode()) for key in TRACE_CONTEXT_KEYS}
    return trace_context_in({key: value.decode("latin-1") for key, value in sent.items() if value})


def _served(spec: AgentSpec) -> bool:
    """Whether an OpenAI client can call the agent: not on its MCP client's model."""
    return not isinstance(spec.model, ClientSampling)


def _model(name: str, created: int) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "agent-gateway"}


def _count(said: str) -> int | None:
    """`said` as a count (ASCII digits only: no sign or space, and not `isdigit`'s "²", which
    `int` refuses); None if it is none."""
    if not (said.isascii() and said.isdecimal()) or len(said) > _MAX_DIGITS:
        return None
    return int(said)


def _text_of(result: types.CallToolResult) -> str:
    """What an MCP client is told (a tool result's text), to tell an OpenAI client."""
    first = result.content[0] if result.content else None
    return first.text if isinstance(first, types.TextContent) else ""


def _ended(why: str) -> str:
    return why


def _failed(message: str, *, code: str = "run_failed") -> ApiError:
    return ApiError(500, message, type="server_error", code=code)


class _Reply:
    """One request's answer: whole, or as chunks (the text deltas pass through a buffer to
    the request's own task, so that a hook of a stored run, in the run's task, never writes
    to the connection). A stream quiet for `keep_alive` seconds (tools run, a model thinks)
    gets an SSE comment, which clients skip: a proxy in front (nginx's `proxy_read_timeout`,
    60 s) would otherwise cut it, and the cut stops the run."""

    def __init__(self, send: Send, request: ChatRequest, run_id: str, keep_alive: float) -> None:
        self._send = send
        self._request = request
        self.run_id = run_id
        self._id = f"chatcmpl-{run_id}"
        self._created = int(time.time())
        self._started = False
        """Whether the stream's headers went (an error after them is its last event)."""
        self._beginning = False
        self._deltas: MemoryObjectSendStream[str | None] | None = None
        """A text delta to send; None: a keep-alive comment; "": the stream begins (`begin`)."""
        self._keep_alive = keep_alive
        self._beats = anyio.CancelScope()
        self._sent_at = 0.0
        """When the stream last sent something (`anyio.current_time`)."""

    @asynccontextmanager
    async def streaming(self) -> AsyncGenerator[None]:
        """While the run goes on: each delta heard sent as a chunk of its own, and a comment
        after each quiet `keep_alive`; at the end, every delta heard is sent. The stream's
        headers and first chunk (the role) go once a model call of the run answered (`begin`)
        or with the first thing sent: a run that fails before that (its conversation over
        the context window, its model unreachable) is answered as one not streamed, with its
        status, which OpenAI's SDKs raise as such (a 400 as `BadRequestError`). Nothing for
        an answer sent whole."""
        if not self._request.stream:
            yield
            return
        self._sent_at = anyio.current_time()  # the first comment after `keep_alive`
        deltas, pending = anyio.create_memory_object_stream[str | None](math.inf)
        async with anyio.create_task_group() as tg, deltas:
            tg.start_soon(self._pass_on, pending)
            tg.start_soon(self._beat, deltas)
            self._deltas = deltas
            try:
                yield
            finally:
                self._deltas = None
                self._beats.cancel()
                deltas.close()  # `_pass_on` ends once it sent what it holds

    async def delta(self, text: str) -> None:
        """A text delta of the answer (from the run's trace)."""
        if self._deltas is None or not text:  # an answer sent whole, or sent already
            return
        with suppress(anyio.BrokenResourceError):  # the request is gone
            self._deltas.send_nowait(text)

    async def begin(self) -> None:
        """A model call of the run answered: the stream begins, if it has not (its headers
        and role chunk, by `_pass_on`, the one writer)."""
        if self._deltas is None or self._started or self._beginning:
            return
        self._beginning = True
        with suppress(anyio.BrokenResourceError):
            self._deltas.send_nowait("")

    async def _beat(self, deltas: MemoryObjectSendStream[str | None]) -> None:
        """Ask `_pass_on` (the one writer) for a comment whenever the stream was quiet for
        `keep_alive` seconds."""
        with self._beats, suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            while True:
                quiet = anyio.current_time() - self._sent_at
                if quiet < self._keep_alive:
                    await anyio.sleep(self._keep_alive - quiet)
                    continue
                deltas.send_nowait(None)
                self._sent_at = anyio.current_time()  # asked once, not again while it waits

    async def _pass_on(self, pending: MemoryObjectReceiveStream[str | None]) -> None:
        async with pending:
            async for text in pending:
                if text is None:
                    await self._write(b": keep-alive\n\n")
                elif text:
                    await self._event({"content": text})
                else:  # `begin`
                    await self._open()

    async def waiting(self, waiting: list[ApprovalRequest], usage: Usage, text: AnswerText) -> None:
        """A stored run waits for a person's approval: its handle's text is the answer."""
        await self._answer(_text_of(handle_result(self.run_id, waiting, {})), usage, text)

    async def finish(self, outcome: RunResult, text: AnswerText, *, stored: bool) -> None:
        """The run's answer; one cut at a token limit (the model's `max_tokens`, the agent's
        `token_budget`) is the text so far, as OpenAI's `finish_reason: "length"` is."""
        item = outcome.items[0]
        if cut_off(item.error):  # the text the model wrote until the cut is the output
            await self._answer(item.output or "", outcome.usage, text, finish_reason="length")
        elif budget_spent(item.error):  # stopped before its answer: what it wrote until then
            # (streamed as it was written, unless held back)
            streamed = self._request.stream and not text.whole
            so_far = "" if streamed else text_before_calls(item.steps or [])
            await self._answer(so_far, outcome.usage, text, finish_reason="length")
        elif item.error is not None:
            run_id = self.run_id if stored else None
            said = item_failed(outcome.agent, item.error, run_id)
            if item.error_code == "context_length_exceeded":  # the client's to trim and retry
                await self.fail(ApiError(400, said, code=item.error_code, param="messages"))
            else:
                await self.fail(_failed(said))
        else:
            await self._answer(item.output or "", outcome.usage, text)

    async def _answer(
        self, said: str, usage: Usage, text: AnswerText, *, finish_reason: str = "stop"
    ) -> None:
        request = self._request
        if not request.stream:
            whole = completion(
                self._id, self._created, request.agent, said, usage, finish_reason=finish_reason
            )
            await _send_json(self._send, 200, whole)
            return
        if text.retracted is not None:  # a handoff's answer began streaming, then failed
            await self.fail(_failed(text.retracted, code="handoff_failed"))
            return
        rest = text.rest(said) if said else ""
        if rest:
            await self._event({"content": rest})
        await self._event({}, finish_reason=finish_reason)
        if request.include_usage:
            usage_chunk = chunk(self._id, self._created, request.agent, None, usage=usage)
            await self._data(json.dumps(usage_chunk, ensure_ascii=False))
        await self._data("[DONE]")
        await self._end()

    async def fail(self, error: ApiError) -> None:
        """The run failed (or was ended): an error answer, or an `error` event in the stream."""
        if not self._started:
            await _send_error(self._send, error)
            return
        await self._data(json.dumps(error.json(), ensure_ascii=False))
        await self._end()

    async def _event(self, delta: dict[str, Any], *, finish_reason: str | None = None) -> None:
        request = self._request
        said = chunk(
            self._id,
            self._created,
            request.agent,
            delta,
            finish_reason=finish_reason,
            include_usage=request.include_usage,
        )
        await self._data(json.dumps(said, ensure_ascii=False))

    async def _data(self, data: str) -> None:
        await self._write(f"data: {data}\n\n".encode())

    async def _open(self) -> None:
        """The stream's headers and its first chunk (the role), once."""
        if self._started:
            return
        self._started = True
        await self._send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await self._event({"role": "assistant", "content": ""})

    async def _write(self, body: bytes) -> None:
        await self._open()
        self._sent_at = anyio.current_time()
        await self._send({"type": "http.response.body", "body": body, "more_body": True})

    async def _end(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})


async def _watch_disconnect(receive: Receive, gone: anyio.Event, scope: anyio.CancelScope) -> None:
    """Cancel the request's work once its client disconnects (`gone` set first: a stored
    run's follower then stops the run, as for an MCP client's cancel)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            scope.cancel()
            return


async def _body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, refused (413) past `limit` bytes; None if the client left."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            return None
        part: bytes = message.get("body", b"")
        size += len(part)
        if size > limit:
            raise ApiError(
                413,
                f"the request body is over {limit} bytes ([gateway] max_request_bytes)",
                code="request_too_large",
            )
        chunks.append(part)
        if not message.get("more_body"):
            return b"".join(chunks)


async def _send_json(
    send: Send, status: int, data: dict[str, Any], headers: Sequence[tuple[bytes, bytes]] = ()
) -> None:
    body = json.dumps(data, ensure_ascii=False).encode()
    start: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(body)),
        *headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": body})


async def _send_error(send: Send, error: ApiError) -> None:
    headers = list(error.headers)
    if error.status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    if error.status >= 500 and error.code == "run_failed":
        headers.append((b"x-should-retry", b"false"))
    await _send_json(send, error.status, error.json(), headers)
