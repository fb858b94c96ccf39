"""Approval across gateways: a served agent's approval question, answered by the calling run.

A gateway serving an agent asks its MCP client to approve a gated call with a form
(`server/client_requests/approvals.py`) that carries the call (its name in the served run,
tool, input, agents) under `APPROVAL_META_KEY`: in `_meta`, and as an annotation of the form's
`approve` field, because 2026-07-28 input-required rounds drop their questions' `_meta`
(a JSON Schema keyword a form ignores). When that client is another gateway's agent
(its node calling the served agent over MCP), nobody is there to fill in a form, but the
calling run has an approver: the question is put to it as one of the run's own calls, named
`<the MCP call's path>/<the call's name over there>` (`runs approve RUN l1/w1`), and the
decision goes back as the form's answer. The served agent goes on where it stopped.

A calling run that stops while the question waits (`--no-wait`, a kill) calls that agent
again when it resumes, and its run there starts over, asking the same call under a new name.
Asked under the same calling tool call for the same tool, input and agents, it is the question
left open (`OpenQuestions`): it takes that one's name, and the decision made on it meanwhile.
A decision is handed on once, so it never approves a call asked after it was used.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, cast

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp_types import ErrorData, InputRequest
from pydantic import JsonValue

from toolkits.mcp.server_requests import refusal

from .approval import (
    CANCELLED,
    DECLINED,
    NOT_ASKED,
    ApprovalRequest,
    Approver,
    AsksAtOnce,
    Decision,
    NobodyToAsk,
    OpenQuestions,
    WaitLeft,
)
from .journal import call_key
from .run_context import RunContext

__all__ = [
    "APPROVAL_META_KEY",
    "RemoteApprovals",
    "approval_meta",
    "approval_schema",
    "decided_here",
]

APPROVAL_META_KEY = "agent-gateway/approval"


def approval_meta(request: ApprovalRequest) -> dict[str, JsonValue]:
    """What a served agent's approval question carries in `_meta`, for a calling gateway."""
    return {APPROVAL_META_KEY: request.model_dump(mode="json")}


def approval_schema(form: Mapping[str, Any], request: ApprovalRequest) -> dict[str, Any]:
    """The approval `form` with the call noted on its `approve` field."""
    properties = dict(form["properties"])
    properties["approve"] = {**properties["approve"], **approval_meta(request)}
    return {**form, "properties": properties}


class RemoteApprovals:
    """Answers the approval questions of one agent tool call's MCP server with the run's
    approver."""

    def __init__(self, context: RunContext, *, call_id: str | None, item: int, span_id: str):
        self._context = context
        self._call_id = call_id or "call"
        self._item = item
        self._span_id = span_id

    async def answer(self, request: InputRequest) -> types.ElicitResult | ErrorData | None:
        """The run's decision on an approval question; None: `request` is not one."""
        remote = _asked(request)
        if remote is None:
            return None
        approver = self._context.approver
        if approver is None or isinstance(approver, AsksAtOnce):
            # A round-asking approver (a 2026-07-28 client without a store) cannot hold a call
            # in flight on another gateway while it asks.
            return refusal(request, "this run cannot wait for a person's approval")
        if isinstance(approver, NobodyToAsk):  # nobody is there (a piped `chat`): why, said
            return refusal(request, approver.why)
        # Named as a sub-agent's call is (`journal.call_key`): two items' calls with the same
        # id are two questions.
        under = f"{self._context.path}{call_key(self._item, self._call_id)}/"
        mine = ApprovalRequest(
            call=f"{under}{remote.call}",
            tool=remote.tool,
            input=remote.input,
            agents=[*self._context.chain, *remote.agents],
            item=self._context.item_of(self._item),
        )
        if isinstance(approver, OpenQuestions):
            mine = approver.asked_again(mine, under) or mine
        tracer = self._context.tracer
        await tracer.note("tool", mine.tool, self._span_id, approval="waiting", call=mine.call)
        decision = await approver.decide(mine)
        said = "approved" if decision.approved else "denied"
        await tracer.note("tool", mine.tool, self._span_id, approval=said, call=mine.call)
        content: dict[str, str | int | float | bool | list[str] | None] = {
            "approve": decision.approved
        }
        if decision.message:
            content["message"] = decision.message
        # A refusal nobody wrote goes back as what it was, for the model over there.
        if decision.refused_as == DECLINED:
            return types.ElicitResult(action="decline", content=content)
        if decision.refused_as == CANCELLED:
            return types.ElicitResult(action="cancel", content=content)
        if decision.refused_as is not None:
            why = decision.refused_as.removeprefix(f"{NOT_ASKED}: ")
            return ErrorData(code=types.INTERNAL_ERROR, message=why)
        return types.ElicitResult(action="accept", content=content)


@dataclass(eq=False)
class _Asked:
    request: ApprovalRequest
    decided: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision | None = None


class _Relay:
    """An approver that hands each request to a task of `decided_here` and waits."""

    def __init__(self, asks: MemoryObjectSendStream[_Asked], approver: Approver) -> None:
        self._asks = asks
        self._approver = approver

    def asked_again(self, request: ApprovalRequest, under: str) -> ApprovalRequest | None:
        if isinstance(self._approver, OpenQuestions):  # in memory: from any task
            return self._approver.asked_again(request, under)
        return None

    async def decide(self, request: ApprovalRequest) -> Decision:
        asked = _Asked(request)
        await self._asks.send(asked)
        await asked.decided.wait()
        assert asked.decision is not None
        return asked.decision


@asynccontextmanager
async def decided_here(context: RunContext) -> AsyncGenerator[RunContext]:
    """`context` with an approver that decides in the task entering this block, wherever it
    is asked from: a node call's approval questions arrive in the MCP client's tasks, or
    inside a recorded step, and a durable run's approver waits for a DBOS message, which only
    its workflow itself may do."""
    approver = context.approver
    if approver is None or isinstance(approver, AsksAtOnce):
        yield context
        return
    send, receive = anyio.create_memory_object_stream[_Asked](8)
    left: list[WaitLeft] = []
    async with anyio.create_task_group() as tg:

        async def decide(asked: _Asked) -> None:
            try:
                asked.decision = await approver.decide(asked.request)
            except WaitLeft as wait:
                # Not waited for (`--no-wait`): the node's call, waiting over there, is cut
                # off; the run resumed calls it again, and it asks again (`OpenQuestions`).
                left.append(wait)
                tg.cancel_scope.cancel()
                return
            asked.decided.set()

        async def decide_each() -> None:
            async with receive:
                async for asked in receive:
                    tg.start_soon(decide, asked)

        tg.start_soon(decide_each)
        try:
            yield replace(context, approver=_Relay(send, approver))
        finally:
            send.close()
            tg.cancel_scope.cancel()
    if left:
        raise left[0]


def _asked(request: InputRequest) -> ApprovalRequest | None:
    if not isinstance(request, types.ElicitRequest):
        return None
    params = request.params
    if not isinstance(params, types.ElicitRequestFormParams):
        return None
    meta = cast(dict[str, Any], params.meta or {})
    approve: Any = params.requested_schema.get("properties", {}).get("approve")
    noted = meta.get(APPROVAL_META_KEY) or (
        cast(dict[str, Any], approve).get(APPROVAL_META_KEY) if isinstance(approve, dict) else None
    )
    try:
        return ApprovalRequest.model_validate(noted)
    except ValueError:
        return None
