"""The step loop: one agent's run, alternating its pure `step` and the dispatch of the
`EngineRequest` it returns.

Every action of a request goes to its node concurrently (bounded by the gateway's limits);
each result or failure becomes an action response. An agent used as a tool runs its own loop
right inside its caller's action: what fails its item is the caller's failed tool, what stops
its run stops the caller's too (once the other actions ended). After every change the run's
state goes to its `RunSaver`, so a stopped run continues from there. The run tree's token
budget is checked before every model call and every dispatch: once it is spent, no further
call is made.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import JsonValue

from agent import (
    Action,
    ActionResponse,
    AgentError,
    AgentResult,
    ChatMemory,
    ChatModel,
    EngineRequest,
    EngineResponse,
    OutputInvalid,
    StepInterrupted,
    StepPaused,
    ToolsAgent,
)
from agent.tools_agent import WarningCallback
from toolkits import NodeStopped, Tool, ToolkitError

from .agent_tool import BadArguments, agent_prompt
from .answered_calls import tell_answered
from .approval import (
    NO_APPROVER,
    ApprovalRequest,
    AsksAtOnce,
    ExpectsSteps,
    NobodyToAsk,
    approval_note,
    ask_in_one_round,
    rejection,
)
from .call_info import info_for, sub_item
from .errors import RunPaused, leaves_of, say_stopped_in, stops_the_run
from .handed_item import handed_item
from .item_results import EMPTY_ANSWER, FinishedItems, empty_failed, outputs
from .journal import RecordedModel, ScopedJournal, call_key
from .model_specs import ClientSampling
from .remote_approvals import decided_here
from .run_context import RunContext
from .run_state import (
    Checkpoint,
    RunSaver,
    RunState,
    answered_by,
    handed_on,
    not_offered,
    spent,
    spent_in,
)
from .sampling_model import asked_together
from .session_owners import owned_memory
from .tool_definitions import ToolDefinitions
from .tool_limits import too_many_tools
from .trace import Tracer
from .traced_model import TracedModel

if TYPE_CHECKING:
    from .engine import AgentSpec, Gateway

log = logging.getLogger(__name__)

__all__ = ["StepLoop"]


class StepLoop:
    """Runs agents of `gateway` step by step on its nodes (and on its agents, as tools)."""

    def __init__(self, gateway: Gateway) -> None:
        self._gateway = gateway
        self._definitions = ToolDefinitions()
        self._too_many: set[str] = set()
        """The agents said to offer more tools than their provider takes (said once each)."""

    def _warn_too_many(self, spec: AgentSpec, model: ChatModel, tools: int) -> None:
        """Say once, before the model is first called, that it will refuse the call."""
        offered = tools + (spec.options.output is not None)  # the answer's own tool
        said = too_many_tools(spec.name, model, offered)
        if said is None:
            self._too_many.discard(spec.name)  # fewer now: said again if it grows back
        elif spec.name not in self._too_many:
            self._too_many.add(spec.name)
            log.warning("%s", said)

    async def drive(
        self,
        spec: AgentSpec,
        state: RunState,
        context: RunContext,
        parent_id: str,
        *,
        checkpoint: Checkpoint | None = None,
        model: ChatModel | None = None,
        journal: ScopedJournal | None = None,
    ) -> AgentResult:
        """Alternate the agent's steps and their dispatch until every item is finished,
        holding the items' chat memory sessions (another run's turns on them wait). A
        finished run's state (`result`) returns its result: no call is made again."""
        if state.result is not None:
            return state.result
        # An authenticated caller's sessions are its own (`session_owners`).
        memory = owned_memory(spec.memory or self._gateway.memory, state.started_by)
        sessions = {item.session_id for item in state.items if item.session_id is not None}
        run = partial(
            self._drive, spec, state, context, parent_id, checkpoint, model, journal, memory
        )
        if memory is None or not sessions:
            return await run()

        async def waiting(session_id: str) -> None:
            await context.tracer.note(
                "agent",
                spec.name,
                parent_id,
                warning=f"session {session_id!r} has a turn in progress in this process: "
                "this one waits for it to end, so that it sees that turn",
                session_waits=session_id,  # progress says what the call waits for
            )

        async with memory.hold(sessions, on_wait=waiting):
            return await run()

    async def _drive(
        self,
        spec: AgentSpec,
        state: RunState,
        context: RunContext,
        parent_id: str,
        checkpoint: Checkpoint | None,
        model: ChatModel | None,
        journal: ScopedJournal | None,
        memory: ChatMemory | None,
    ) -> AgentResult:
        gateway = self._gateway
        tools = await gateway.tools_for(spec)
        configured = spec.model
        if isinstance(configured, ClientSampling):  # the client's model, with its settings
            configured = configured.answered_by(context.client_model)
        chosen = model or configured
        context = context.enter(spec.name, chosen)
        recorded = RecordedModel(chosen, journal) if journal is not None else chosen
        tracer = context.tracer
        sessions = {item.session_id for item in state.items if item.session_id is not None}
        # The conversation its items continue (telemetry's `gen_ai.conversation.id`), if one.
        said: JsonValue = {"session_id": sessions.pop()} if len(sessions) == 1 else None
        async with tracer.span("agent", spec.name, parent_id=parent_id, input=said) as agent_span:
            for node, health in gateway.unhealthy(spec.tools).items():
                # Its tools are missing from the model's list: say why in the trace.
                await tracer.note("tool", node, agent_span.id, health=health)
            handoffs = [name for name in spec.handoffs if name in gateway.agents]
            definitions = self._definitions.of(
                spec.name, tools, handoffs, handoff_history=spec.handoff_history
            )
            self._warn_too_many(spec, chosen, len(definitions))
            traced = partial(
                TracedModel,
                recorded,
                tracer,
                agent_span.id,
                context.budget,
                context_window=spec.context_window,
                hops=context.depth,
                answers=context.answers,
            )
            agent = ToolsAgent(
                model=traced(stream=context.stream),
                tools=definitions,
                options=spec.options,
                memory=memory,
                run_id=state.run_id,
                fit_history_to_window=True,
                on_warning=_warning_note(tracer, spec.name, agent_span.id),
                summary_model=traced(stream=False),  # only the answer streams
                why_missing=partial(_why_missing, gateway, spec.tools),
            )
            saver = RunSaver(state, checkpoint, journal)
            await saver.rooted(tracer.root_context(agent_span.id))
            finished = FinishedItems(tracer, spec.name, agent_span.id, len(state.items))
            request, response = state.request, state.response
            while True:
                if request is None:
                    if context.budget.exceeded:
                        outcome = await agent.stop(state.items, response, context.budget.message())
                        break
                    try:
                        outcome = await agent.step(state.items, response)
                    except (StepInterrupted, StepPaused) as stop:
                        # What the other items did is kept: a resumed run repeats none of it.
                        await saver.save(request=stop.progress, response=None)
                        await finished.tell(stop.progress.metadata.finished_items)
                        if isinstance(stop, StepPaused):  # each item's question in one round
                            raise asked_together(stop.signals) or stop.signals[0] from None
                        raise stop.error from None
                    if isinstance(outcome, AgentResult):
                        break
                    await finished.tell(outcome.metadata.finished_items)
                    await tell_answered(tracer, saver.journal, agent_span.id, outcome)
                    request, response = outcome, None
                    await saver.save(request=request, response=None)
                if context.budget.exceeded:
                    # The answer that spent the budget (or a sibling's) asked for tools: none
                    # runs. The saved request keeps them pending, so a run resumed with a
                    # larger budget makes each call once.
                    stopped = context.budget.message()
                    not_run = _not_run(request, stopped, state)
                    outcome = await agent.stop(state.items, not_run, stopped)
                    break
                response = await self.dispatch(request, tools, context, agent_span.id, saver)
                request = None
                if saver.journal is None:
                    await saver.save(
                        request=None, response=response, children={}, finished={}, answered={}
                    )
                else:
                    # Every answer is recorded: resumed from the saved request, the run gets
                    # them all from the record again. One state write per step, not two.
                    saver.update(request=None, response=response, children={}, finished={})
            items = list(outcome.items)
            for index, item in enumerate(items):
                failed = empty_failed(item)
                if failed is not item:
                    # Nothing answered is no success, wherever the answer goes (a terminal,
                    # an MCP client, a calling agent): the item failed, and says why.
                    await tracer.note(
                        "agent", spec.name, agent_span.id, warning=EMPTY_ANSWER, item=index
                    )
                    items[index] = failed
            outcome = outcome.model_copy(update={"items": items})
            # The items not told of yet (each item's line says what the result says).
            await finished.tell(dict(enumerate(outcome.items)))
            agent_span.output = outputs(outcome.items)  # as the trace tells each hop
        outcome = answered_by(outcome, saver.state)
        # Finished: its last checkpoint says so (with a journal, its store keeps the result).
        # A run the budget stopped keeps its request, for a resume on a larger budget.
        if saver.journal is None and not context.budget.exceeded:
            await saver.save(request=None, result=outcome)
        return outcome

    async def dispatch(
        self,
        request: EngineRequest,
        tools: Mapping[str, Tool],
        context: RunContext,
        parent_id: str,
        saver: RunSaver,
    ) -> EngineResponse:
        """Run every action of `request` concurrently; failures become error responses."""
        responses: list[ActionResponse | None] = [None] * len(request.actions)
        # Calls that ended before the run paused (a round of questions to the client), kept in
        # its state where no journal records them: not asked about, nor run, again.
        answered = saver.state.answered if saver.journal is None else {}
        for index, action in enumerate(request.actions):
            responses[index] = answered.get(call_key(action.item_index, action.tool_call_id))

        asked = {
            index: needed
            for index, action in enumerate(request.actions)
            if responses[index] is None
            and (needed := self._approval_request(action, tools, context)) is not None
        }
        if asked and isinstance(context.approver, AsksAtOnce):
            await ask_in_one_round(
                context.approver, list(asked.values()), context.tracer, parent_id
            )
        elif asked and isinstance(context.approver, ExpectsSteps):
            context.approver.expect(asked.values())

        stopped: list[AgentError] = []
        paused: list[RunPaused] = []

        async def run_one(index: int, action: Action) -> None:
            try:
                await answer(index, action)
            except AgentError as failure:
                # A sub-agent's run stopped (its model unreachable, say): this run stops too,
                # once the other calls have ended (each recorded), so a resumed run repeats none.
                stopped.append(failure)
            except RunPaused as pause:  # `--no-wait`, or a question for the client: the same
                paused.append(pause)

        async def answer(index: int, action: Action) -> None:
            if responses[index] is not None:
                return  # it ended before the run paused
            # A call that needs approval waits for it here, outside its record.
            decided = await self._approval(action, asked.get(index), context, parent_id)
            refused = decided if isinstance(decided, ActionResponse) else None
            note = decided if isinstance(decided, str) else None
            key = call_key(action.item_index, action.tool_call_id)
            if saver.journal is None:
                response = responses[index] = refused or _noted(
                    await self.run_action(action, tools, context, parent_id, saver), note
                )
                await saver.ended(key, response)  # kept: a paused run resumes past it
                return

            name = f"tool {action.item_index} {action.tool_call_id}"
            nested = action.node in self._gateway.agents  # an agent: its calls are recorded
            journal = saver.journal
            # A node's server may ask for approval inside the call's record (a gateway's
            # agent, `remote_approvals`): the run's approver decides out here.
            async with nullcontext(context) if nested else decided_here(context) as here:

                async def run() -> JsonValue:
                    done = refused or _noted(
                        await self.run_action(action, tools, here, parent_id, saver), note
                    )
                    return done.model_dump(mode="json")

                recorded = await journal.record(name, run, nested=nested)
            response = responses[index] = ActionResponse.model_validate(recorded)
            # Counted now, not only once every call of the step ended: the run may stop first.
            await saver.ended(key, response)

        try:
            if len(request.actions) == 1:
                # No task group for one call: a call waiting for approval (for days, maybe)
                # would hold the group and a task beside its own (~2 kB a run).
                await run_one(0, request.actions[0])
            else:
                async with anyio.create_task_group() as tg:
                    for index, action in enumerate(request.actions):
                        tg.start_soon(run_one, index, action)
        except BaseExceptionGroup as group:
            # What escapes an action is a signal for the whole run (a stop, a pause for the
            # client's answer): let it arrive as itself, not wrapped, however deep it began.
            leaves = leaves_of(group)
            if len(leaves) == 1:
                raise leaves[0] from None
            raise
        if stopped:
            raise stopped[0]
        if paused:  # sub-agents' questions for the client's model all in one round
            raise asked_together(paused) or paused[0]
        done = [r for r in responses if r is not None]
        return EngineResponse(action_responses=done, metadata=request.metadata)

    def _approval_request(
        self, action: Action, tools: Mapping[str, Tool], context: RunContext
    ) -> ApprovalRequest | None:
        """What to ask a person before `action` runs; None if it needs no approval."""
        tool = tools.get(action.tool)
        spec = self._gateway.agents.get(context.chain[-1]) if context.chain else None
        if tool is None or spec is None or not self._gateway.needs_approval(spec, tool):
            return None
        return ApprovalRequest(
            call=f"{context.path}tool {action.item_index} {action.tool_call_id}",
            tool=action.tool,
            input=action.arguments(from_toolkit=tool.is_from_toolkit),
            agents=list(context.chain),
            item=context.item_of(action.item_index),
        )

    async def _approval(
        self,
        action: Action,
        request: ApprovalRequest | None,
        context: RunContext,
        parent_id: str,
    ) -> ActionResponse | str | None:
        """None if the action may run (it needs no approval, or was approved); the note to
        tell the model after its result if it was approved with a message (`approval_note`);
        else what the model is told instead (denied, or nobody to ask). Waits for the
        decision."""
        if request is None:
            return None
        tracer = context.tracer
        approver = context.approver or NO_APPROVER
        if isinstance(approver, NobodyToAsk):
            await tracer.note("tool", action.tool, parent_id, approval="refused", call=request.call)
            return ActionResponse(action=action, error=approver.why)
        await tracer.note("tool", action.tool, parent_id, approval="waiting", call=request.call)
        decision = await approver.decide(request)
        said = "approved" if decision.approved else "denied"
        await tracer.note("tool", action.tool, parent_id, approval=said, call=request.call)
        if decision.approved:
            return approval_note(decision)
        if self._hands_off(action, context):  # failed, not answered: its text is no answer
            return ActionResponse(action=action, error=rejection(request, decision))
        return ActionResponse(action=action, data=rejection(request, decision))

    def _hands_off(self, action: Action, context: RunContext) -> bool:
        """Whether `action` hands the conversation of the agent running it to another."""
        spec = self._gateway.agents.get(context.chain[-1]) if context.chain else None
        return (
            spec is not None
            and action.node in spec.handoffs
            and action.node in self._gateway.agents
        )

    def _unfit(self, agent: str, answer: str) -> str | None:
        """Why a handed-off `answer` does not fit `agent`'s output schema (None: it does)."""
        spec = self._gateway.agents.get(agent)
        schema = spec.options.output if spec is not None else None
        if schema is None:
            return None
        try:
            schema.from_text(answer)
        except OutputInvalid as invalid:
            return f"the answer does not fit the output schema of {agent!r} ({invalid})"
        return None

    async def run_action(
        self,
        action: Action,
        tools: Mapping[str, Tool],
        context: RunContext,
        parent_id: str,
        saver: RunSaver,
    ) -> ActionResponse:
        """One action: its node's tool called, or its agent run; never raises for a failed
        tool (the model is told), only for signals that stop the whole run, and for what stops
        an agent's run (as it would at the top: its model unreachable, a bad key, ...)."""
        tool = tools.get(action.tool)
        tracer = context.tracer
        if tool is None or tool.source_node != action.node:
            # A stored run resumed on a gateway whose nodes changed: the model is told so.
            gone = not_offered(action, saver.state)
            async with tracer.span(
                "tool", action.tool, parent_id=parent_id, input=action.input,
                call_id=action.tool_call_id,
            ) as span:  # fmt: skip
                span.fail(gone.error or "")
            return gone
        arguments = action.arguments(from_toolkit=tool.is_from_toolkit)
        if action.node in self._gateway.agents:
            # An agent used as a tool resolves its run right here, inside this call. It takes
            # no limiter slot: its own tool calls do, and holding one here could deadlock.
            # Its items' failures are the caller's failed tool; what stops its run stops this
            # one (its state is kept in this one's, so a resumed run goes on inside it).
            async with tracer.span(
                "tool", action.tool, parent_id=parent_id, input=arguments,
                call_id=action.tool_call_id,
            ) as span:  # fmt: skip
                response = await self._run_agent_tool(action, arguments, context, span.id, saver)
                span.output, span.error = response.data, response.error
                return response
        try:
            call = await self._gateway.call_node(
                tool,
                arguments,
                tracer,
                parent_id,
                context.quota,
                meta=context.call_meta(),
                agent=context,
                call_id=action.tool_call_id,
                item=action.item_index,
                info=info_for(context, saver.state, action),
            )
        except NodeStopped:
            raise  # the gateway is stopping: the call had no outcome to tell the model of
        except ToolkitError as exc:  # the node could not serve it: the model is told why
            return ActionResponse(action=action, error=str(exc) or type(exc).__name__)
        except Exception as exc:
            log.exception("node %r failed calling %r", tool.source_node, tool.name)
            if stops_the_run(exc):
                raise
            # A bug fails its call alone: a stopped run would call it again on each resume.
            bug = f"{type(exc).__name__}: {exc}"
            return ActionResponse(action=action, error=f"node {tool.source_node!r} failed: {bug}")
        return ActionResponse(
            action=action, data=call.data, error=call.error, usage=call.usage, media=call.media
        )

    async def _run_agent_tool(
        self,
        action: Action,
        arguments: Mapping[str, Any],
        context: RunContext,
        parent_id: str,
        saver: RunSaver,
    ) -> ActionResponse:
        max_depth = self._gateway.max_depth
        inner = self._gateway.agents[action.node]
        if inner.name in context.chain:
            cycle = " -> ".join((*context.chain, inner.name))
            return ActionResponse(action=action, error=f"agent cycle refused: {cycle}")
        too_deep = context.too_deep(inner.name, max_depth)
        if too_deep is not None:
            return ActionResponse(action=action, error=too_deep)
        handing = self._hands_off(action, context)
        handed = saver.state.items[action.item_index].prompt if handing else None  # as it came
        prompt = agent_prompt(arguments, handed=handed, by=context.chain[-1])
        if isinstance(prompt, BadArguments):
            return ActionResponse(action=action, error=prompt.error)
        key = call_key(action.item_index, action.tool_call_id)
        saved = saver.state.children.get(key)
        if saved is not None and saved.agent == inner.name:
            state = saved  # a stored run stopped while this agent worked: go on where it was
        else:
            lead = self._gateway.agents.get(context.chain[-1]) if handing else None
            if lead is not None and lead.handoff_history:  # the conversation goes along
                memory = owned_memory(lead.memory or self._gateway.memory, saver.state.started_by)
                item = await handed_item(prompt, saver.state, action, memory, lead.handoffs)
            else:
                item = sub_item(prompt, saver.state, action)
            state = RunState(
                run_id=context.tracer.run_id,
                agent=inner.name,
                items=[item],
                started_by=context.tracer.subject,
            )
        checkpoint = saver.child(key)
        journal = saver.journal.child(key) if saver.journal else None
        # Its own token_budget caps its subtree (from what it spent before a stop), inside ours.
        budget = context.budget.within(inner.token_budget, inner.name, spent(state))
        try:
            outcome = await self.drive(
                inner,
                state,
                context.inside(action.item_index, action.tool_call_id, budget, handed=handing),
                parent_id,
                checkpoint=checkpoint,
                journal=journal,
            )
        except AgentError as failure:
            say_stopped_in(failure, (*context.chain, inner.name))
            raise
        item = outcome.items[0]
        error = item.error
        if error == EMPTY_ANSWER:
            error = f"agent {inner.name!r} gave an empty answer ({EMPTY_ANSWER})"
        if handing and context.answers:
            # Its text streamed as the answer's: its readers learn when it is not (it failed,
            # or its answer does not fit our schema, which `agent.handoff` tells our model).
            refused = error or self._unfit(context.chain[-1], item.output or "")
            if refused is not None:
                await context.tracer.note(
                    "agent", context.chain[-1], parent_id, handoff_failed=inner.name, error=refused
                )
        if error is not None:
            return ActionResponse(action=action, error=error, usage=outcome.usage)
        if handing:  # whose answer it is: the agent it handed on to, if it did (`answered_by`)
            saver.update(handed_on=handed_on(saver.state, action.item_index, item.handoff))
        # An answer our model reads is capped as a tool's result; a handed-on one is the user's.
        told = item.output if handing else inner.answer_for_caller(item.output)
        return ActionResponse(action=action, data={"response": told}, usage=outcome.usage)


def _not_run(request: EngineRequest, why: str, state: RunState) -> EngineResponse:
    """`request`'s calls answered, without being made, with `why` (for the run's result: the
    saved state keeps them pending); a call that began or ended before the run stopped
    (`state.children`, `state.finished`) with what it spent."""
    return EngineResponse(
        action_responses=[
            ActionResponse(action=action, error=why, usage=spent_in(state, action))
            for action in request.actions
        ],
        metadata=request.metadata,
    )


def _noted(response: ActionResponse, note: str | None) -> ActionResponse:
    """`response` with `note` to tell the model after it (a person's words with their
    approval), recorded with it: a resumed run tells the model the same."""
    return response.model_copy(update={"note": note}) if note else response


def _why_missing(gateway: Gateway, nodes: Sequence[str], name: str) -> str | None:
    """For a call of `NODE__TOOL` whose node (one of the agent's) is down: so it says; for
    a name a tool had before it was renamed: its name now."""
    health = gateway.not_ready(name, nodes)
    if health is None:
        return gateway.renamed(name, nodes)
    return f"tool {name!r} is not available now: its server is not ready ({health})"


def _warning_note(tracer: Tracer, agent: str, span_id: str) -> WarningCallback:
    """The agent's warnings (history left out to fit the window, a failed summary), as
    `warning` notes under its span."""

    async def note(item: int, warning: str) -> None:
        await tracer.note("agent", agent, span_id, warning=warning, item=item)

    return note
