"""A downstream server's requests to its client, relayed to our own client during proxied calls.

A proxied request (`tools/call`, `prompts/get`, `resources/read` of an exposed MCP node) runs
through `for_client`, which hands it the `CallContext` that makes our client the one that
answers the downstream server's sampling, elicitation and roots requests:

- handshake-era clients (2025-11-25) are asked at once, over the request's back-channel, the
  question in their era's shape (`in_era`: a URL elicitation names its id); the server's word
  that a URL elicitation put to the client is complete reaches it on the request too
  (`elicitation_completer`: 2025-11-25 clients only, the era that has the notification);
- 2026-07-28 clients cannot be sent requests: the proxied request is parked and the question
  travels in an `InputRequiredResult` (`parked_calls`).

The downstream server's log messages during the call go to our client too (`notifications.log_messages.log_relay`),
related to the request; to 2026-07-28 clients through whichever round is waiting.

A client that did not declare the capability (sampling, sampling with tools, elicitation in the
mode asked, roots) is never asked: the downstream server gets an MCP error saying that the
upstream client lacks it; a 2025-11-25 client served `--stateless`, which cannot be asked
during a call, one saying that. A 2026-07-28 node tells its server, for the call, only what our
client declared (`answerable`), so such a server knows before it asks.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ValidationError

from toolkits import CallContext, ToolkitError, validation_brief
from toolkits.mcp.server_requests import ASKING, refusal

from ...run_context import ClientQuestions
from ...sampling_model import no_back_channel
from ..connection import connection_of
from ..notifications.log_messages import log_relay
from ..served.relaying import as_mcp_error, hop_meta, without_stamp
from ..serving import serving
from .forwarding import forward_round
from .parked_calls import ANSWER_TIMEOUT

__all__ = [
    "agent_questions",
    "answer_type",
    "answerable",
    "asking_capabilities",
    "asking_declared",
    "elicitation_completer",
    "for_client",
    "in_era",
    "missing_capability",
    "proxy_request",
    "relay_to_client",
    "upstream_problem",
]

_R = TypeVar("_R")
_Answer = TypeVar("_Answer", bound=BaseModel)


def answerable(session: ServerSession) -> dict[str, Any]:
    """What our client answers of a server's requests, as the client capabilities it declared
    for them (`CallContext.answerable`): none where it cannot be asked at all."""
    if no_back_channel(session) is not None:
        return {}
    return asking_capabilities(session.client_capabilities)


def asking_capabilities(declared: types.ClientCapabilities | None) -> dict[str, Any]:
    """The `ASKING` ones of a client's `declared` capabilities, as it declared them."""
    if declared is None:
        return {}
    return asking_declared(declared.model_dump(mode="json", by_alias=True, exclude_none=True))


def asking_declared(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The `ASKING` ones of client capabilities as the wire carries them (JSON)."""
    return {key: value for key in ASKING if (value := capabilities.get(key)) is not None}


def upstream_problem(session: ServerSession, request: types.InputRequest) -> str | None:
    """Why our client cannot answer `request`, or None."""
    # First: a stateless request's session was never initialized, so what its client declared
    # is unknown here, not absent ("lacks elicitation" blamed a client that declared it).
    problem = no_back_channel(session)
    if problem is not None:
        return problem
    capabilities = session.client_capabilities or types.ClientCapabilities()
    return missing_capability(capabilities, request)


def in_era(request: types.InputRequest, version: str | None) -> types.InputRequest:
    """`request` as a client speaking `version` must receive it. A URL-mode elicitation names
    an `elicitationId` in the handshake era (2025-11-25 requires it; 2026-07-28 removed it,
    and the SDK leaves it out there): a 2026-07-28 server's has none, so it is given one of
    ours, fresh and opaque (no answer or notification we pass on names it). Before 2025-11-25
    elicitation had no modes: a form's `mode` is left out there (a client of that era cannot
    be asked a URL: `missing_capability`)."""
    if version in MODERN_PROTOCOL_VERSIONS:
        return request
    match request:
        case types.ElicitRequest(params=types.ElicitRequestURLParams(elicitation_id=None) as url):
            named = url.model_copy(update={"elicitation_id": secrets.token_urlsafe(16)})
            return types.ElicitRequest(params=named)
        case types.ElicitRequest(params=types.ElicitRequestFormParams() as form) if (
            version is not None and version < _MODES_SINCE
        ):
            # None: left out of the wire's JSON, which drops what is None (the SDK's too).
            return types.ElicitRequest(params=form.model_copy(update={"mode": None}))
        case _:
            return request


def elicitation_completer(
    version: str | None, tell: Callable[[str], Awaitable[None]]
) -> Callable[[str], Awaitable[None]] | None:
    """`tell`, for a client speaking `version` to be told that a URL-mode elicitation it was
    asked is complete (`CallContext.on_elicitation_complete`), if its era has that
    notification (2025-11-25: not earlier, and 2026-07-28 removed it); else None."""
    if version is None or version < _MODES_SINCE or version in MODERN_PROTOCOL_VERSIONS:
        return None
    return tell


_MODES_SINCE = "2025-11-25"
"""The first protocol version with elicitation modes (form, URL) and so with
`notifications/elicitation/complete` (versions are dates)."""


def missing_capability(
    capabilities: types.ClientCapabilities, request: types.InputRequest
) -> str | None:
    """The capability a client declaring `capabilities` lacks to answer `request`, or None."""
    match request:
        case types.CreateMessageRequest(params=params):
            sampling = capabilities.sampling
            if sampling is None:
                return "the upstream client lacks sampling"
            if params.tools and sampling.tools is None:
                return "the upstream client lacks sampling with tools"
        case types.ElicitRequest(params=params):
            elicitation = capabilities.elicitation
            if elicitation is None:
                return "the upstream client lacks elicitation"
            if isinstance(params, types.ElicitRequestURLParams) and elicitation.url is None:
                return "the upstream client lacks URL-mode elicitation"
            # An elicitation capability naming no mode means form mode (2025-06-18 clients).
            if (
                isinstance(params, types.ElicitRequestFormParams)
                and elicitation.form is None
                and elicitation.url is not None
            ):
                return "the upstream client lacks form-mode elicitation"
        case types.ListRootsRequest():
            if capabilities.roots is None:
                return "the upstream client lacks roots"
    return None


async def relay_to_client(
    ctx: ServerRequestContext[Any, Any], request: types.InputRequest
) -> types.InputResponse | types.ErrorData:
    """Ask the handshake-era client of `ctx` over the request's back-channel."""
    problem = upstream_problem(ctx.session, request)
    if problem is not None:
        return refusal(request, problem)
    try:
        with anyio.fail_after(ANSWER_TIMEOUT):
            answer = await ctx.session.send_request(
                in_era(request, ctx.session.protocol_version),
                answer_type(request),
                metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
            )
    except TimeoutError:
        return refusal(request, f"the upstream client gave no answer within {ANSWER_TIMEOUT:g} s")
    except NoBackChannelError as exc:
        return refusal(request, f"the upstream connection cannot carry it ({exc})")
    except MCPError as exc:
        return exc.error  # the client's own refusal, passed on as it is
    except ValidationError as exc:
        brief = validation_brief(exc, "it")
        return refusal(request, f"the upstream client's answer is malformed: {brief}")
    assert isinstance(
        answer,
        types.CreateMessageResult
        | types.CreateMessageResultWithTools
        | types.ElicitResult
        | types.ListRootsResult,
    )
    return answer


def agent_questions(ctx: ServerRequestContext[Any, Any]) -> ClientQuestions | str:
    """Who answers the elicitations of the tools' servers of an agent run the request of `ctx`
    serves: its client, asked during the request, if it can be and declared elicitation; else
    why nobody can (the run's `questions`)."""
    session = ctx.session
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return (
            "the tool was called by an agent whose MCP client speaks 2026-07-28: it is asked "
            "only between rounds of its call, and a tool call in flight cannot wait for one"
        )
    problem = no_back_channel(session)
    if problem is not None:
        return f"the tool was called by an agent whose MCP client cannot be asked: {problem}"
    declared = asking_capabilities(session.client_capabilities).get("elicitation")
    if declared is None:
        return "the tool was called by an agent whose MCP client declared no elicitation"

    async def ask(request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        return await relay_to_client(ctx, request)

    return ClientQuestions(ask, {"elicitation": declared})


def answer_type(request: types.InputRequest) -> type[types.InputResponse]:
    """The model a client's answer to `request` must fit."""
    match request:
        case types.CreateMessageRequest(params=params):
            return types.CreateMessageResultWithTools if params.tools else types.CreateMessageResult
        case types.ElicitRequest():
            return types.ElicitResult
        case types.ListRootsRequest():
            return types.ListRootsResult


async def for_client(
    ctx: ServerRequestContext[Any, Any],
    params: types.InputResponseRequestParams,
    work: Callable[[CallContext], Awaitable[_R]],
) -> _R | types.InputRequiredResult:
    """Run a proxied request with our client answering its server's requests (one round).

    `work` is given the `CallContext` to call the node with: our client's progress, log
    messages and answers, and the `_meta` one hop further. Raises what `work` raises, or
    `MCPError` for a 2026-07-28 retry whose parked request is gone.
    """
    state = serving(ctx)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and state is not None:
        report, log = ctx.session.report_progress, log_relay(ctx)

        async def elsewhere(owner: str, parked: str) -> Any:
            return await forward_round(owner, ctx, params, parked, report=report, log=log)

        return await state.parked.serve(
            params,
            work,
            meta=hop_meta(ctx),
            check=lambda request: upstream_problem(ctx.session, request),
            answerable=answerable(ctx.session),
            report=report,
            log=log,
            elsewhere=elsewhere,
        )

    async def ask(request: types.InputRequest) -> types.InputResponse | types.ErrorData:
        return await relay_to_client(ctx, request)

    async def complete(elicitation_id: str) -> None:
        await ctx.session.send_elicit_complete(elicitation_id, related_request_id=ctx.request_id)

    # Calls of one connection may stand in for each other where the downstream transport
    # cannot tell which call a request belongs to: they all answer to the same client.
    context = CallContext(
        on_progress=ctx.session.report_progress,
        meta=hop_meta(ctx),
        on_log=log_relay(ctx),
        answer=ask,
        owner=connection_of(ctx),
        answerable=answerable(ctx.session),
        on_elicitation_complete=elicitation_completer(ctx.session.protocol_version, complete),
    )
    return await work(context)


async def proxy_request(
    ctx: ServerRequestContext[Any, Any],
    params: types.InputResponseRequestParams,
    node: str,
    request: Callable[[CallContext], Awaitable[_Answer]],
) -> _Answer | types.InputRequiredResult:
    """A request (a prompt, a resource) proxied to `node` for our client (`for_client`): the
    answer as its server gave it (without its stamp), a failure of the node as an MCP error."""

    async def work(context: CallContext) -> _Answer:
        try:
            return await request(context)
        except ToolkitError as exc:
            raise as_mcp_error(node, exc) from exc

    outcome = await for_client(ctx, params, work)
    if isinstance(outcome, types.InputRequiredResult):
        return outcome
    return without_stamp(outcome)
