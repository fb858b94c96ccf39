"""Proxied calls of tools a server's approval rule covers: the calling client is asked first.

`[mcpServers.X] require_approval` (and `require_approval_if_destructive`) hold for every call
of the server's tools, an MCP client's in proxy mode as much as an agent's. Which served tools
a rule covers is decided once per listing (`ProxiedTools`): those never pass straight through
(`passing`), and the usual path asks the calling client with the form a served agent's gated
call is asked with (`client_requests.approvals`), before the call goes to its server:

- a 2025-11-25 client that declared form elicitation is asked during the call;
- a 2026-07-28 client that declared it is asked in an input-required round; its retry carries
  the answer, bound by the sealed `requestState` to the tool, its arguments and the caller (an
  answer sent without that state asks again). The round sent again gets the first answer
  (`round_replays`): an approved call runs once. A later round of an approved call (its
  server's own questions, `parked_calls`) goes on without asking again;
- a client that can be asked neither way gets an error result naming the rule.

Approved, the call runs as any other; refused, its result says so (with the person's message).
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from toolkits import error_result

from ...approval import ApprovalRequest, Decision, rejection
from ..client_requests.approvals import answer_key, decision_of, question
from ..client_requests.ask_client import missing_capability, relay_to_client, upstream_problem
from ..client_requests.parked_calls import STATE_PREFIX as PARKED_STATE
from ..transports.auth import authenticated_subject
from .round_replays import RoundReplays, round_key

__all__ = ["APPROVAL_STATE", "ProxiedApprovals"]

APPROVAL_STATE = "agent-gateway/approval:"
"""How the `requestState` of a proxied call's approval round begins (a nonce follows)."""

Answer = types.CallToolResult | types.InputRequiredResult
Run = Callable[[types.CallToolRequestParams], Awaitable[Answer]]


class ProxiedApprovals:
    """Asks the client before a gated proxied call runs (see the module docstring)."""

    def __init__(self) -> None:
        self._rounds = RoundReplays()

    async def call(
        self,
        ctx: ServerRequestContext[Any, Any],
        params: types.CallToolRequestParams,
        rule: str,
        run: Run,
        *,
        parks: bool,
    ) -> Answer:
        """`run(params)` once the client of `ctx` approves the call, else why it did not run.
        `rule` names what gates the tool (`Gateway.node_rule`); `parks`: its node's calls may
        go on across rounds (`parked_calls`), whose retries continue an approved call."""
        request = ApprovalRequest(
            call=params.name,
            tool=params.name,
            input=dict(params.arguments or {}),
            agents=[],
            item=0,
        )
        form = question(request, why=rule)
        session = ctx.session
        if session.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            problem = upstream_problem(session, form)
            if problem is not None:
                return _not_asked(params.name, rule, problem)
            return await _decided(
                request, decision_of(await relay_to_client(ctx, form)), params, run
            )
        declared = session.client_capabilities or types.ClientCapabilities()
        problem = missing_capability(declared, form)
        if problem is not None:
            return _not_asked(params.name, rule, problem)
        # The state boundary opened `requestState`: only a state minted for this very call.
        state = params.request_state
        if state is not None and parks and state.startswith(PARKED_STATE):
            return await run(params)  # a later round of a call approved in an earlier one
        answer = (params.input_responses or {}).get(answer_key(request))
        if state is None or not state.startswith(APPROVAL_STATE) or answer is None:
            nonce = APPROVAL_STATE + secrets.token_urlsafe(16)  # each ask a round of its own
            return types.InputRequiredResult(
                input_requests={answer_key(request): form}, request_state=nonce
            )
        fresh = params.model_copy(update={"request_state": None, "input_responses": None})
        key = round_key(params.name, authenticated_subject(), state, params.input_responses)
        decided = partial(_decided, request, decision_of(answer), fresh, run)
        return await self._rounds.once(key, params.name, decided, what="tool")


async def _decided(
    request: ApprovalRequest, decision: Decision, params: types.CallToolRequestParams, run: Run
) -> Answer:
    if not decision.approved:
        return error_result(rejection(request, decision))
    return await run(params)


def _not_asked(tool: str, rule: str, problem: str) -> types.CallToolResult:
    # The client reads it: what the gateway calls its upstream client is "it" here.
    needs = f"The tool call to {tool} did not run: it needs a person's approval ({rule}), and"
    by_agent = "have an agent call it (a stored run waits for `agent-gateway runs approve`)."
    lacks = problem.removeprefix("the upstream client ")
    if lacks == problem:  # not what it declared, but how it is served (`no_back_channel`)
        return error_result(f"{needs} {problem}; or {by_agent}")
    return error_result(
        f"{needs} this client cannot be asked (it {lacks}). Call it from an MCP client that "
        f"supports elicitation, or {by_agent}"
    )
