"""A served run's calls that need approval are asked of the MCP client that started the run.

- A handshake-era client (2025-11-25) that declared form elicitation is asked at once, over
  the request's back-channel: the run waits in the request.
- A 2026-07-28 client that declared elicitation is asked in an input-required round: before
  any call of the step runs, the tool call ends with the step's questions
  (`ApprovalInputRequired`) and the run's state; the client's retry carries the answers, and
  the step runs with them.
- A client that can do neither has nobody to ask: the gated calls are refused (the model is
  told why).

The question is a form with `approve` (boolean) and `message` (told to the model); its
`_meta` names the call, for a gateway that calls this one (`gateway.remote_approvals`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp_types import CONNECTION_CLOSED
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import JsonValue

from ...approval import CANCELLED, DECLINED, NOT_ASKED, ApprovalRequest, Approver, Decision
from ...errors import RunPaused
from ...remote_approvals import approval_meta, approval_schema
from .ask_client import relay_to_client, upstream_problem

__all__ = ["ApprovalInputRequired", "ClientApprover", "RoundApprover", "client_approver"]

WAITING = "waiting for the client's approval"

APPROVAL_FORM: types.ElicitRequestedSchema = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Allow this tool call",
            "description": "true runs the call; false refuses it",
        },
        "message": {
            "type": "string",
            "title": "Message to the agent",
            "description": "Optional: why, or what to do instead",
        },
    },
    "required": ["approve"],
}


class ApprovalInputRequired(RunPaused):
    """The client must answer these questions (by key) before the step can run (2026-07-28)."""

    def __init__(self, requests: dict[str, types.InputRequest]) -> None:
        super().__init__(f"{WAITING} ({', '.join(requests)})", reason=WAITING)
        self.requests = requests


def question(
    request: ApprovalRequest,
    meta: Mapping[str, JsonValue] | None = None,
    *,
    why: str | None = None,
) -> types.ElicitRequest:
    """The form asking about `request`; `meta` adds to its `_meta` (the task it is for).
    `why`: the rule that asks, for a call no agent made (a proxied one: `request.agents` is
    empty)."""
    said = json.dumps(request.input, ensure_ascii=False)
    if request.agents:
        message = f"Agent {request.agents[-1]!r} wants to call {request.tool} with {said}."
    else:
        message = f"The call of {request.tool} with {said} needs a person's approval ({why})."
    message += " Allow it?"
    # The call travels for a calling gateway (`gateway.remote_approvals`): in `_meta`, and in
    # the form (2026-07-28 rounds carry no `_meta` on their questions).
    schema = approval_schema(APPROVAL_FORM, request)
    return types.ElicitRequest(
        params=types.ElicitRequestFormParams(
            message=message,
            requested_schema=schema,
            _meta=cast(types.RequestParamsMeta, {**approval_meta(request), **(meta or {})}),
        )
    )


def answer_key(request: ApprovalRequest) -> str:
    return f"approve {request.call}"


def decision_of(answer: Any) -> Decision:
    """The client's answer to `question` as a decision: anything but an accepted `approve:
    true` is a refusal. Only a message the person wrote is theirs (`Decision.message`); a
    form declined, cancelled or not shown says so (`Decision.refused_as`)."""
    if isinstance(answer, types.ErrorData):
        return Decision(approved=False, refused_as=f"{NOT_ASKED}: {answer.message}")
    if not isinstance(answer, types.ElicitResult):
        try:
            answer = types.ElicitResult.model_validate(
                answer.model_dump(by_alias=True, exclude_none=True)
            )
        except Exception:
            unread = f"{NOT_ASKED}: the client's answer was not one to the form"
            return Decision(approved=False, refused_as=unread)
    content: Mapping[str, Any] = answer.content or {}
    said = content.get("message")
    message = said if isinstance(said, str) and said.strip() else None
    if answer.action == "decline":
        return Decision(approved=False, message=message, refused_as=DECLINED)
    if answer.action != "accept":
        return Decision(approved=False, message=message, refused_as=CANCELLED)
    return Decision(approved=content.get("approve") is True, message=message)


class ClientApprover:
    """Asks a handshake-era client over the request's back-channel (elicitation); each form
    carries `meta` in its `_meta` too (the task it is for: `served.agent_tasks`)."""

    def __init__(
        self, ctx: ServerRequestContext[Any, Any], meta: Mapping[str, JsonValue] | None = None
    ) -> None:
        self._ctx = ctx
        self._meta = dict(meta or {})

    async def decide(self, request: ApprovalRequest) -> Decision:
        return decision_of(await relay_to_client(self._ctx, question(request, self._meta)))

    async def ask(self, request: ApprovalRequest) -> Decision | None:
        """The client's decision, or None if it gave none because it is gone: its connection
        closed, or the request that carried the question ended (a run that can wait for a
        decision from elsewhere does; `decide` takes that as a refusal)."""
        answer = await relay_to_client(self._ctx, question(request, self._meta))
        if isinstance(answer, types.ErrorData) and (
            answer.code == CONNECTION_CLOSED or not self._ctx.session.can_send_request
        ):
            return None
        return decision_of(answer)


class RoundApprover:
    """Asks a 2026-07-28 client in input-required rounds; `answers` came with this retry."""

    def __init__(self, answers: Mapping[str, types.InputResponse] | None) -> None:
        self._answers = dict(answers or {})

    async def ask_at_once(self, requests: Sequence[ApprovalRequest]) -> None:
        missing = {
            answer_key(r): question(r) for r in requests if answer_key(r) not in self._answers
        }
        if missing:
            raise ApprovalInputRequired(dict[str, types.InputRequest](missing))

    async def decide(self, request: ApprovalRequest) -> Decision:
        answer = self._answers.get(answer_key(request))
        if answer is None:  # only for a call `ask_at_once` was not shown
            raise ApprovalInputRequired({answer_key(request): question(request)})
        return decision_of(answer)


def client_approver(
    ctx: ServerRequestContext[Any, Any],
    answers: Mapping[str, types.InputResponse] | None,
    meta: Mapping[str, JsonValue] | None = None,
) -> Approver | None:
    """Who approves the calls of a run this request started (or follows), or None: nobody
    can be asked. A form shown during the request carries `meta` in its `_meta` too."""
    session = ctx.session
    capabilities = session.client_capabilities
    if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
        can = capabilities is not None and capabilities.elicitation is not None
        return RoundApprover(answers) if can else None
    probe = question(ApprovalRequest(call="", tool="", input={}, agents=[""], item=0))
    return ClientApprover(ctx, meta) if upstream_problem(session, probe) is None else None
