"""Each configured agent as an MCP tool: `{prompt, session_id?}` in, the answer out.

A call runs the agent through the same engine and trace as the CLI, with one more hook that
turns the trace into the client's progress and log notifications. Every way a run can fail
(max iterations, a model error, a misconfigured node) is an `is_error` result naming the
cause, and saying whether the run failed or stopped (`run_failures`); cancelling the request
cancels the run and every call under it (a stored run only when the client cancels it: see
`stored_runs`). While the run goes on (a model or tool call in flight, a call waiting for a
person's approval), the client hears progress at least every `progress_interval` seconds.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator
from pydantic_core import ErrorDetails

from agent import AgentError, AgentItem, ItemResult
from toolkits import ToolkitError, error_result, in_background

from ...agent_tool import PROMPT_OR_ITEMS, SERVED_INPUT_SCHEMA, usage_meta
from ...approval import NOT_STORED, ApprovalRequest
from ...call_info import with_context
from ...catalog import same_objects
from ...engine import AgentSpec, Gateway
from ...errors import GatewayError, UnknownRun
from ...item_results import steps_json
from ...model_specs import ClientSampling
from ...node_slots import lent_in
from ...run_state import RunResult, RunState, spent
from ...sampling_model import (
    DEFAULT_MAX_TOKENS,
    SamplingInputRequired,
    SamplingModel,
    sampling_problem,
)
from ...session_owners import session_id_problem
from ...trace import TraceHook, new_id, trace_context_in
from ..client_requests.approvals import (
    ApprovalInputRequired,
    RoundApprover,
    answer_key,
    client_approver,
    question,
)
from ..client_requests.ask_client import agent_questions
from ..client_requests.run_rounds import decode_state, encode_state
from ..connection import cancel_requested
from ..notifications.run_progress import HEARTBEAT_SECONDS, McpNotifier
from ..serving import client_quota
from ..transports.auth import authenticated_subject
from .output_schemas import OUTPUT_SCHEMA, output_schema
from .relaying import incoming_hops
from .round_replays import RoundReplays, round_key
from .run_failures import item_failed, note_stored, stopped, stored_failure
from .stored_runs import ROUND_STATE_PREFIX, StoredAgentRuns, handle_result, round_run_id

__all__ = ["INPUT_SCHEMA", "OUTPUT_SCHEMA", "AgentTools", "run_result"]

log = logging.getLogger(__name__)

INPUT_SCHEMA = SERVED_INPUT_SCHEMA


class _Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    prompt: str | None = None
    session_id: str | None = None
    items: list[AgentItem] | None = Field(default=None, min_length=1)
    context: dict[str, JsonValue] | None = None

    @model_validator(mode="after")
    def _prompt_or_items(self) -> _Arguments:
        if self.prompt is None and self.items is None:
            raise ValueError(f"no question: {PROMPT_OR_ITEMS}")
        if self.prompt is not None and self.items is not None:
            raise ValueError("give `prompt` or `items`, not both")
        prompts = [self.prompt] if self.items is None else [i.prompt for i in self.items]
        if any(not (p or "").strip() for p in prompts):
            raise ValueError("a prompt must not be empty")  # as an agent called as a tool says
        if self.items is not None and self.session_id is not None:
            raise ValueError("with `items`, each item has its own `session_id`")
        return self

    def agent_items(self) -> list[AgentItem]:
        if self.items is not None:
            return with_context(self.items, self.context)
        assert self.prompt is not None
        return [AgentItem(prompt=self.prompt, session_id=self.session_id, context=self.context)]


def _arguments(agent: str, given: dict[str, Any] | None) -> _Arguments | types.CallToolResult:
    """The call's arguments, or an error result that says what is wrong with them."""
    try:
        return _Arguments.model_validate(given or {})
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        return error_result(f"invalid arguments for agent {agent!r}: {problems}")


def _problem(error: ErrorDetails) -> str:
    """One validation error in plain words: our own checks' message as written, a field's
    with the field's name."""
    ctx = error.get("ctx") or {}
    said = str(ctx["error"]) if error["type"] == "value_error" and "error" in ctx else error["msg"]
    where = ".".join(str(part) for part in error["loc"])
    return f"{where}: {said}" if where else said


class AgentTools:
    """The gateway's agents as MCP tools."""

    def __init__(
        self,
        gateway: Gateway,
        *,
        sampling_max_tokens: int = DEFAULT_MAX_TOKENS,
        progress_interval: float = HEARTBEAT_SECONDS,
        stored: StoredAgentRuns | None = None,
    ) -> None:
        """With `stored`, runs are kept in the run store (but for agents on the client's
        model)."""
        self._gateway = gateway
        self._max_tokens = sampling_max_tokens
        self._progress_interval = progress_interval
        self._stored = stored
        self._rounds = RoundReplays()
        self._served: tuple[tuple[AgentSpec, ...], list[types.Tool]] = ((), [])
        """The agents last listed, and their tools (the same list while the agents are)."""

    async def tools(self) -> list[types.Tool]:
        specs = tuple(self._gateway.agents.values())
        if not same_objects(self._served[0], specs):
            self._served = (specs, self._tools(specs))
        return self._served[1]

    def _tools(self, specs: tuple[AgentSpec, ...]) -> list[types.Tool]:
        return [
            types.Tool(
                name=spec.name,
                description=spec.tool_description(),
                input_schema=INPUT_SCHEMA,
                output_schema=output_schema(spec),
                # With a store, a 2025-11-25 client may ask for a task (`agent_tasks`).
                execution=types.ToolExecution(task_support="optional")
                if self._stored is not None and not isinstance(spec.model, ClientSampling)
                else None,
            )
            for spec in specs
        ]

    def node_of(self, name: str) -> str | None:
        return name if name in self._gateway.agents else None

    def _checked_arguments(
        self, spec: AgentSpec, params: types.CallToolRequestParams
    ) -> _Arguments | types.CallToolResult:
        """The call's arguments, or an error result saying what is wrong with them (also a
        `session_id` for an agent with no chat memory, which would keep it nowhere, or one
        that can name no session: bad input, which no run would cure)."""
        args = _arguments(spec.name, params.arguments)
        if isinstance(args, types.CallToolResult):
            return args
        kept = spec.memory is not None or self._gateway.memory is not None
        sessions = [item.session_id for item in args.agent_items() if item.session_id is not None]
        if not kept and sessions:
            return error_result(
                f"invalid arguments for agent {spec.name!r}: session_id: this gateway keeps "
                "no conversations for it (no chat memory); call it without session_id"
            )
        owner = authenticated_subject()
        for session_id in sessions:
            problem = session_id_problem(session_id, owner)
            if problem is not None:
                return error_result(
                    f"invalid arguments for agent {spec.name!r}: session_id "
                    f"{session_id[:40]!r}: {problem}"
                )
        return args

    async def call(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        spec = self._gateway.agents[params.name]
        args = self._checked_arguments(spec, params)
        if isinstance(args, types.CallToolResult):
            return args
        stored = self._stored if not isinstance(spec.model, ClientSampling) else None
        notifier = McpNotifier(ctx, heartbeat=self._progress_interval, stored=stored is not None)
        async with in_background(notifier.keep_alive, wait_started=False):
            if stored is None and params.request_state is not None:
                # A round's answers: however often they are sent, the round runs once.
                subject = authenticated_subject()
                key = round_key(spec.name, subject, params.request_state, params.input_responses)
                answer = partial(self._answer, ctx, spec, args, params, notifier, None)
                decides = partial(_resumed, params.request_state)
                return await self._rounds.once(key, spec.name, answer, decides=decides)
            return await self._answer(ctx, spec, args, params, notifier, stored)

    async def _answer(
        self,
        ctx: ServerRequestContext[Any, Any],
        spec: AgentSpec,
        args: _Arguments,
        params: types.CallToolRequestParams,
        notifier: McpNotifier,
        stored: StoredAgentRuns | None,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The run's answer (or its next round), a failure as an error result."""
        try:
            if stored is not None:
                return await self._run_stored(ctx, stored, spec, args, params, notifier)
            # The notifier besides the gateway's own hooks (--trace, ...).
            return await self._run(ctx, spec, args, params, [notifier])
        except (AgentError, GatewayError, ToolkitError) as exc:
            return error_result(stopped(spec.name, exc))
        except Exception as exc:  # a bug must not take the connection down
            log.exception("agent %r crashed", spec.name)
            return error_result(f"agent {spec.name!r} failed: {type(exc).__name__}: {exc}")

    async def _run(
        self,
        ctx: ServerRequestContext[Any, Any],
        spec: AgentSpec,
        args: _Arguments,
        params: types.CallToolRequestParams,
        hooks: Sequence[TraceHook],
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The run, or a round of it: a 2026-07-28 client's retry resumes it from the state
        its last round returned, with the answers to that round's questions."""
        model: SamplingModel | None = None
        # Its sub-agents on `model = "sampling"` think with the client's model too (asked with
        # their own settings); a client that cannot be one fails their first call, saying why.
        client_model = SamplingModel(
            ctx, answers=params.input_responses, max_tokens=self._max_tokens
        )
        if isinstance(spec.model, ClientSampling):
            problem = sampling_problem(ctx.session, with_tools=bool(spec.tools))
            if problem is not None:
                return error_result(
                    f'agent {spec.name!r} runs on the client\'s own model (model = "sampling" '
                    f"in [agents.{spec.name}]), which this client cannot be: {problem}. To run "
                    f"it here instead, set `model` in [agents.{spec.name}] to a model spec."
                )
            model = client_model = client_model.with_settings(spec.model.settings)
        state: RunState | None = None
        if params.request_state is not None:
            state = decode_state(params.request_state, spec.name)
            if state is None:
                return error_result(
                    f"agent {spec.name!r}: cannot resume this call (its state is from another "
                    "agent or version); call the tool again"
                )
        if state is None:
            state = RunState(
                run_id=new_id(),
                agent=spec.name,
                items=args.agent_items(),
                started_by=authenticated_subject(),
                caller_trace=trace_context_in(ctx.meta),
            )
        latest = [state]

        async def keep(checkpoint: RunState) -> None:
            latest[0] = checkpoint

        try:
            result = await self._gateway.resume(
                state,
                checkpoint=keep,
                hooks=hooks,
                model=model,
                hops=incoming_hops(ctx),
                lent=lent_in(ctx.meta),
                quota=client_quota(ctx, self._gateway),
                stream=model is None,  # streamed text shows in the progress of a long call
                # Nobody to ask: the remedy is a run store, or a client that can be asked.
                approver=client_approver(ctx, params.input_responses) or NOT_STORED,
                questions=agent_questions(ctx),
                client_model=client_model,
            )
        except (AgentError, GatewayError, ToolkitError) as exc:
            # What it spent until it stopped, for a calling gateway's usage and token_budget
            # (as a finished run's result says).
            failed = error_result(stopped(spec.name, exc))
            return failed.model_copy(update={"meta": usage_meta(spent(latest[0]))})
        except (SamplingInputRequired, ApprovalInputRequired) as need:
            # The run goes on when the client retries with the answers: resumed from
            # `latest`, it asks the same questions again and finds their answers by key.
            asked = dict[str, types.InputRequest](need.requests)
            return types.InputRequiredResult(
                input_requests=asked, request_state=encode_state(latest[0])
            )
        return run_result(
            result, steps=spec.options.return_intermediate_steps, items=args.items is not None
        )

    async def begin_task(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> str | types.CallToolResult:
        """Start a call as a stored run, not followed (a task): the run's id, or why not."""
        spec = self._gateway.agents[params.name]
        if self._stored is None:
            return error_result(f"agent {spec.name!r} cannot run as a task: no run store")
        if isinstance(spec.model, ClientSampling):
            return error_result(
                f"agent {spec.name!r} cannot run as a task: it runs on the client's own model"
            )
        args = self._checked_arguments(spec, params)
        if isinstance(args, types.CallToolResult):
            return args
        state = RunState(
            run_id=new_id(),
            agent=spec.name,
            items=args.agent_items(),
            started_by=authenticated_subject(),
            origin=self._stored.origin,
            caller_trace=trace_context_in(ctx.meta),
            task=True,
        )
        quota = client_quota(ctx, self._gateway)
        await self._stored.begin(
            state, hops=incoming_hops(ctx), quota=quota, lent=lent_in(ctx.meta)
        )
        return state.run_id

    def is_agent(self, name: str) -> bool:
        return name in self._gateway.agents

    def spec(self, name: str) -> AgentSpec | None:
        return self._gateway.agents.get(name)

    async def _run_stored(
        self,
        ctx: ServerRequestContext[Any, Any],
        stored: StoredAgentRuns,
        spec: AgentSpec,
        args: _Arguments,
        params: types.CallToolRequestParams,
        notifier: McpNotifier,
    ) -> types.CallToolResult | types.InputRequiredResult:
        """The run in the run store (see `stored_runs`): its answer, a round of approval
        questions, or a run handle."""
        asker = client_approver(ctx, params.input_responses)
        run_id = round_run_id(params.request_state)
        if run_id is not None:  # a 2026-07-28 client's answers to a round
            following = _answered(stored, run_id, params, notifier, cancel_requested(ctx))
        else:
            state = RunState(
                run_id=new_id(),
                agent=spec.name,
                items=args.agent_items(),
                started_by=authenticated_subject(),
                caller_trace=trace_context_in(ctx.meta),
                origin=stored.origin,
            )
            run_id = state.run_id
            following = stored.start(
                state,
                follower=notifier,
                hops=incoming_hops(ctx),
                lent=lent_in(ctx.meta),
                quota=client_quota(ctx, self._gateway),
                asker=asker,
                stop=cancel_requested(ctx),
            )
        note_stored(stored, run_id)
        try:
            outcome = await following
        except (AgentError, GatewayError, ToolkitError) as exc:
            return await stored_failure(stored, spec.name, run_id, exc)
        if isinstance(outcome, str):  # a round sent again after its run ended without an answer
            return error_result(f"agent {spec.name!r}: {outcome}")
        if isinstance(outcome, RunResult):
            steps = spec.options.return_intermediate_steps
            return run_result(outcome, steps=steps, items=args.items is not None, stored=True)
        if isinstance(asker, RoundApprover):
            asked = {answer_key(r): question(r) for r in outcome}
            return types.InputRequiredResult(
                input_requests=dict[str, types.InputRequest](asked),
                request_state=ROUND_STATE_PREFIX + run_id,
            )
        stored.log_waiting(run_id, outcome)
        stored.showing(run_id, outcome)
        return handle_result(run_id, outcome, await stored.usage_so_far(run_id))


async def _answered(
    stored: StoredAgentRuns,
    run_id: str,
    params: types.CallToolRequestParams,
    notifier: McpNotifier,
    stop: anyio.Event | None,
) -> RunResult | list[ApprovalRequest] | str:
    """A round's answers sent to its stored run, which is followed on; a run that has ended
    (the round sent again: its answer was lost) or ends meanwhile (sent twice at once) gives
    its end once more."""
    ended = await stored.ended(run_id)
    if ended is not None:
        return ended
    decided = await stored.answer_round(run_id, params.input_responses)
    try:
        return await stored.follow(run_id, notifier, decided=decided, stop=stop)
    except UnknownRun:
        ended = await stored.ended(run_id)
        if ended is None:
            raise
        return ended


def _resumed(state: str, answer: types.CallToolResult | types.InputRequiredResult) -> bool:
    """Whether a round's answers moved its run on: a run asking from the very state it was
    resumed from found none of its questions answered (none sent, or under other keys), so
    the round decided nothing."""
    return not (isinstance(answer, types.InputRequiredResult) and answer.request_state == state)


def run_result(
    result: RunResult, *, steps: bool, items: bool = False, stored: bool = False
) -> types.CallToolResult:
    """A finished run as a tool result: the answer as text and as `{output, usage, steps?}`;
    with `items`, every item's `{output, error}` (the text: one JSON line each). Its `_meta`
    has the usage too, for a calling gateway to roll up (`agent_tool`). A `stored` run's
    failure names the run."""
    usage = result.usage.model_dump(mode="json")
    meta = usage_meta(result.usage)
    if items:
        answers = [_item_answer(i) for i in result.items]
        lines = "\n".join(json.dumps(a, ensure_ascii=False) for a in answers)
        return types.CallToolResult(
            content=[types.TextContent(text=lines)],
            structured_content={"items": answers, "usage": usage},
            is_error=all(i.error is not None for i in result.items),
            _meta=meta,
        )
    item = result.items[0]
    if item.error is not None:
        run_id = result.run_id if stored else None
        failed = error_result(item_failed(result.agent, item.error, run_id))
        return failed.model_copy(update={"meta": meta})
    output = item.output or ""
    structured: dict[str, Any] = {"output": _output(item), "usage": usage}
    if steps:
        structured["steps"] = steps_json(item.steps or ())
    if item.handoff is not None:
        structured["handoff"] = item.handoff
    return types.CallToolResult(
        content=[types.TextContent(text=output)], structured_content=structured, _meta=meta
    )


def _item_answer(item: ItemResult) -> dict[str, Any]:
    """One item's `{output, error}`, and `handoff` when another agent gave the answer."""
    answer = {"output": _output(item), "error": item.error}
    return answer if item.handoff is None else {**answer, "handoff": item.handoff}


def _output(item: ItemResult) -> Any:
    """What `output` holds: the answer's text, or with an output schema the answer itself."""
    return item.structured if item.structured is not None else item.output
