"""The engine: runs agents, dispatching their requests to tool nodes.

A run alternates between the agent's pure `step` and the dispatch of the `EngineRequest` it
returns: every action goes to its node concurrently (bounded per node, and per client and node:
`limits`), and
each result or failure becomes an action response. The run's whole state is a `RunState`,
handed to an optional checkpoint after every step, from which `Gateway.resume` continues in
any process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import anyio
from mcp_types import CallToolResult, LoggingMessageNotificationParams
from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent import (
    Action,
    ActionResponse,
    AgentError,
    AgentItem,
    AgentOptions,
    AgentResult,
    ChatMemory,
    ChatModel,
    EngineRequest,
    EngineResponse,
    ItemResult,
    StepInterrupted,
    ToolDefinition,
    ToolsAgent,
    Usage,
)
from agent.scratchpad import ERROR_PREFIX
from toolkits import (
    ProgressCallback,
    Tool,
    Toolkit,
    ToolkitError,
    result_data,
    result_text,
    split_routed_input,
)
from toolkits.mcp import McpToolkit, answering, on_server_log
from toolkits.observation import DEFAULT_MAX_CHARS

from .agent_answers import ModelAnswers
from .errors import (
    ConfigError,
    DepthExceeded,
    GatewayError,
    ToolConflict,
    UnknownAgent,
    UnknownTool,
)
from .journal import Journal, RecordedModel, ScopedJournal
from .limits import DEFAULT_CLIENT_LIMIT, DEFAULT_NODE_LIMIT, PerNode
from .models import ClientSampling
from .run_context import HOPS_META_KEY, RunContext, TokenBudget
from .trace import TraceHook, Tracer, new_id
from .traced_model import TracedModel

__all__ = [
    "EMPTY_ANSWER",
    "AgentSpec",
    "Checkpoint",
    "Gateway",
    "RunOrigin",
    "RunResult",
    "RunState",
]

RUN_STATE_VERSION = 1
EMPTY_ANSWER = "the model's final answer was empty"


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent the gateway can run: its model, the nodes whose tools it may call, options."""

    name: str
    model: ChatModel
    tools: Sequence[str] = ()
    options: AgentOptions = field(default_factory=AgentOptions)
    description: str = ""
    token_budget: int | None = None
    """Tokens the whole run tree may spend (this agent and every agent it calls)."""
    memory: ChatMemory | None = None
    """Where this agent keeps conversations; default: the gateway's."""
    context_window: int | None = None
    """Tokens the model's context holds, when its provider does not report it: a call that
    would not fit fails before it is sent."""


class RunOrigin(BaseModel):
    """How a stored run was started, so it resumes the same way (the engine ignores it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config: str | None = None
    """The config file's absolute path; None: the built-in default."""
    config_sha256: str | None = None
    """The file's content hash when the run started: a changed config is not resumed blindly."""
    model: str | None = None
    """The model spec that replaced every agent's (`--model`), if any."""
    system: str | None = None
    """The run's agent's system message, if the run replaced it (`--system`)."""
    temperature: float | None = None
    """Every agent's temperature, if the run set it (`--temperature`)."""
    max_tokens: int | None = None
    """Every agent's answer length, if the run set it (`--max-tokens`)."""


class RunState(BaseModel):
    """Everything needed to continue a run: the items and the agent's pending exchange.

    `request` is set when the agent's actions are still to run, `response` when they ran and
    the agent is to resume; neither is set before the first step.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: Literal[1] = RUN_STATE_VERSION
    run_id: str
    agent: str
    items: list[AgentItem]
    request: EngineRequest | None = None
    response: EngineResponse | None = None
    started_by: str | None = None
    """Who started the run: the authenticated subject of the MCP client that called the agent
    (served over HTTP with OAuth or static tokens); None when run locally."""
    children: dict[str, RunState] = Field(default_factory=dict[str, "RunState"])
    """Agents running as tools of the pending `request`, by tool-call id: their own states,
    so a run stopped while they worked resumes them where they were."""
    origin: RunOrigin | None = None
    """How the run was started (config, model), for resuming it."""


class RunResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    run_id: str
    agent: str
    items: list[ItemResult]
    usage: Usage
    iterations: int

    @property
    def output(self) -> str | None:
        """The first item's answer: what a single-question run returns."""
        return self.items[0].output

    @property
    def structured(self) -> JsonValue:
        """The first item's validated answer, for an agent with an output schema (as JSON
        data: `Model.model_validate(result.structured)` for a pydantic model's)."""
        return self.items[0].structured

    @property
    def error(self) -> str | None:
        return self.items[0].error


Checkpoint = Callable[[RunState], Awaitable[None]]


class Gateway:
    """Named tool nodes and agents, and the engine that runs the agents on those nodes."""

    def __init__(
        self,
        nodes: Iterable[Toolkit] = (),
        agents: Iterable[AgentSpec] = (),
        *,
        memory: ChatMemory | None = None,
        max_concurrency: int = DEFAULT_CLIENT_LIMIT,
        node_limits: Mapping[str, int] | None = None,
        max_depth: int = 4,
        hooks: Sequence[TraceHook] = (),
    ) -> None:
        self.nodes: dict[str, Toolkit] = {node.name: node for node in nodes}
        self.agents: dict[str, AgentSpec] = {spec.name: spec for spec in agents}
        self.memory = memory
        self.hooks = tuple(hooks)
        self.max_depth = max_depth
        """How many agents deep a run may nest (agents calling agents as tools)."""
        self.max_concurrency = max_concurrency
        """Calls one client (a run, or an MCP client's connection) may have in flight per node."""
        self._node_limits = PerNode(DEFAULT_NODE_LIMIT, node_limits)

    def client_quota(self) -> PerNode:
        """A fresh client's share of the nodes (see `limits`)."""
        return PerNode(self.max_concurrency)

    async def run(
        self,
        agent: str,
        prompt: str | Sequence[AgentItem],
        *,
        session_id: str | None = None,
        checkpoint: Checkpoint | None = None,
        hooks: Sequence[TraceHook] = (),
        model: ChatModel | None = None,
        hops: int = 0,
        stream: bool = False,
        quota: PerNode | None = None,
        started_by: str | None = None,
    ) -> RunResult:
        """Run `agent` on one prompt (or several items) to the end.

        `hooks` are added to the gateway's for this run; `model` replaces the agent's model for
        this run (e.g. the calling MCP client's own model, through sampling); `hops` is how many
        gateways the request already passed through (served runs read it from `_meta`);
        `stream` asks every model of the run to stream, each text delta a `token` event;
        `quota` is the calling client's share of the nodes (default: the run's own).
        `started_by` is who asked (recorded on the state and every trace event).
        """
        items = (
            [AgentItem(prompt=prompt, session_id=session_id)]
            if isinstance(prompt, str)
            else list(prompt)
        )
        state = RunState(run_id=new_id(), agent=agent, items=items, started_by=started_by)
        return await self.resume(
            state,
            checkpoint=checkpoint,
            hooks=hooks,
            model=model,
            hops=hops,
            stream=stream,
            quota=quota,
        )

    async def resume(
        self,
        state: RunState,
        *,
        checkpoint: Checkpoint | None = None,
        hooks: Sequence[TraceHook] = (),
        model: ChatModel | None = None,
        hops: int = 0,
        stream: bool = False,
        quota: PerNode | None = None,
        journal: Journal | None = None,
    ) -> RunResult:
        """Continue a run from a stored state (or start one that has not stepped yet).

        With a `journal`, every model and tool call is recorded there, and one it already
        holds is answered from it, not made again.
        Raises `DepthExceeded` when `hops` already reaches the depth limit.
        """
        spec = self._agent(state.agent)
        self._check_hops(hops)
        tracer = Tracer(state.run_id, (*self.hooks, *hooks), subject=state.started_by)
        exchange = state.response or state.request
        # A resumed run has spent what its metadata says: the budget counts on from there.
        budget = TokenBudget(spec.token_budget, exchange.metadata.usage if exchange else Usage())
        quota = quota or self.client_quota()
        context = RunContext(tracer, budget, quota, hops=hops, client_model=model, stream=stream)
        summary: dict[str, JsonValue] = {"agent": spec.name, "items": len(state.items)}
        prompt: JsonValue = state.items[0].prompt if len(state.items) == 1 else summary
        async with tracer.span(
            "run", spec.name, parent_id=None, input=prompt, span_id=state.run_id
        ) as run_span:
            outcome = await self._drive(
                spec,
                state,
                context,
                state.run_id,
                checkpoint=checkpoint,
                model=model,
                journal=ScopedJournal(journal) if journal is not None else None,
            )
            run_span.output = _outputs(outcome.items)
        return RunResult(
            run_id=state.run_id,
            agent=spec.name,
            items=outcome.items,
            usage=outcome.usage,
            iterations=outcome.iterations,
        )

    async def _drive(
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
        """Alternate the agent's steps and their dispatch until every item is finished."""
        tools = await self.tools_for(spec)
        chosen = model or _model_for(spec, context)
        context = context.enter(spec.name, chosen)
        recorded = RecordedModel(chosen, journal) if journal is not None else chosen
        tracer = context.tracer
        async with tracer.span("agent", spec.name, parent_id=parent_id) as agent_span:
            for node in self._unhealthy(spec.tools):
                # Its tools are missing from the model's list: say why in the trace.
                await tracer.note("tool", node.name, agent_span.id, health=str(node.health))
            agent = ToolsAgent(
                model=TracedModel(
                    recorded,
                    tracer,
                    agent_span.id,
                    context.budget,
                    stream=context.stream,
                    context_window=spec.context_window,
                ),
                tools=[_definition(tool) for tool in tools.values()],
                options=spec.options,
                memory=spec.memory or self.memory,
                run_id=state.run_id,
            )
            saver = _Saver(state, checkpoint, journal)
            request, response = state.request, state.response
            while True:
                if request is None:
                    if context.budget.exceeded:
                        outcome = agent.stop(state.items, response, context.budget.message())
                        break
                    try:
                        outcome = await agent.step(state.items, response)
                    except StepInterrupted as stop:
                        # What the other items did is kept: a resumed run repeats none of it.
                        await saver.save(request=stop.progress, response=None)
                        raise stop.error from None
                    if isinstance(outcome, AgentResult):
                        break
                    await _trace_answered(tracer, agent_span.id, outcome)
                    request, response = outcome, None
                    await saver.save(request=request, response=None)
                response = await self._dispatch(request, tools, context, agent_span.id, saver)
                request = None
                await saver.save(request=None, response=response, children={})
            for index, item in enumerate(outcome.items):
                if item.error is None and not (item.output or "").strip():
                    await tracer.note(
                        "agent", spec.name, agent_span.id, warning=EMPTY_ANSWER, item=index
                    )
            agent_span.output = _outputs(outcome.items)
        return outcome

    def _unhealthy(self, node_names: Sequence[str]) -> list[McpToolkit]:
        nodes = (self.nodes.get(name) for name in node_names)
        return [n for n in nodes if isinstance(n, McpToolkit) and n.health.state != "ready"]

    async def tools_for(self, spec: AgentSpec) -> dict[str, Tool]:
        """The tools an agent may call, by the name the model sees."""
        return await self._tools_of(spec.tools, f"agent {spec.name!r}")

    async def list_tools(self) -> dict[str, Tool]:
        """Every tool of every node, by the name the model sees."""
        return await self._tools_of(list(self.nodes), "the gateway")

    async def call_tool(
        self,
        tool: str | Tool,
        arguments: Mapping[str, Any],
        *,
        hooks: Sequence[TraceHook] = (),
        on_progress: ProgressCallback | None = None,
        hops: int = 0,
        quota: PerNode | None = None,
    ) -> CallToolResult:
        """One call of a node's tool (by name, or as listed) outside any agent, bounded and
        traced like an agent's; `on_progress` receives the tool's progress.

        Raises `UnknownTool`, `DepthExceeded` when `hops` already reaches the depth limit, and
        the node's own errors (`toolkits.ToolkitError`).
        """
        self._check_hops(hops)
        if isinstance(tool, str):
            tools = await self.list_tools()
            found = tools.get(tool)
            if found is None:
                known = ", ".join(sorted(tools))
                raise UnknownTool(f"no tool named {tool!r} (available: {known})")
            tool = found
        tracer = Tracer(new_id(), (*self.hooks, *hooks))
        call = await self._call_node(
            tool,
            arguments,
            tracer,
            None,
            quota or self.client_quota(),
            meta={HOPS_META_KEY: hops + 1},
            relay=on_progress,
        )
        return call.result

    async def _call_node(
        self,
        tool: Tool,
        arguments: Mapping[str, Any],
        tracer: Tracer,
        parent_id: str | None,
        quota: PerNode,
        *,
        meta: Mapping[str, Any],
        relay: ProgressCallback | None = None,
        agent: RunContext | None = None,
        call_id: str | None = None,
    ) -> _NodeCall:
        """The one way a node's tool is called: bounded by the limits, traced, its progress
        and its server's log messages noted (progress also relayed), its result read for the
        model. For an `agent`'s call, the agent's model answers the server's sampling requests.
        The node's errors propagate."""
        node = self.nodes[tool.source_node]
        cap = _output_cap(node)
        async with (
            quota.limiter(node.name),
            self._node_limits.limiter(node.name),
            tracer.span(
                "tool", tool.name, parent_id=parent_id, input=dict(arguments), call_id=call_id
            ) as span,
        ):

            async def progress(done: float, total: float | None, message: str | None) -> None:
                if relay is not None:
                    await relay(done, total, message)
                data: dict[str, JsonValue] = {"progress": done, "total": total, "message": message}
                await tracer.note("tool", tool.name, span.id, "progress", **data)

            async def server_log(params: LoggingMessageNotificationParams) -> None:
                # An MCP server's log message during this call (attributed by the node).
                data: dict[str, JsonValue] = {
                    "log": params.level,
                    "logger": params.logger,
                    "data": params.data,
                }
                await tracer.note("tool", tool.name, span.id, "note", **data)

            answers = None
            with ExitStack() as scope:
                scope.enter_context(on_server_log(server_log))
                if agent is not None and agent.model is not None:
                    model = TracedModel(agent.model, tracer, span.id, agent.budget)
                    answers = ModelAnswers(model)
                    scope.enter_context(answering(answers.handle, owner=tracer))
                result = await node.call_tool(tool.name, arguments, on_progress=progress, meta=meta)
            usage = answers.usage if answers is not None else Usage()
            if result.is_error:
                span.fail(result_text(result, cap) or "the tool reported an error")
                return _NodeCall(result, error=span.error, usage=usage)
            span.output = result_data(result, max_chars=cap)
            return _NodeCall(result, data=span.output, usage=usage)

    async def _tools_of(self, node_names: Sequence[str], owner: str) -> dict[str, Tool]:
        listed: dict[str, Sequence[Tool]] = {}

        async def list_node(name: str) -> None:
            listed[name] = await self.nodes[name].list_tools()

        for name in node_names:
            if name in self.agents and name not in self.nodes:
                listed[name] = [_agent_tool(self.agents[name])]
        missing = [name for name in node_names if name not in self.nodes and name not in listed]
        if missing:
            raise ConfigError(f"{owner} uses nodes that are not configured: {missing}")
        async with anyio.create_task_group() as tg:
            for name in node_names:
                if name not in listed:
                    tg.start_soon(list_node, name)
        tools: dict[str, Tool] = {}
        for name in node_names:
            for tool in listed[name]:
                other = tools.get(tool.name)
                if other is not None:
                    raise ToolConflict(
                        f"{owner}: tool {tool.name!r} is offered by nodes "
                        f"{other.source_node!r} and {tool.source_node!r}; give one a prefix"
                    )
                tools[tool.name] = tool
        return tools

    async def _dispatch(
        self,
        request: EngineRequest,
        tools: Mapping[str, Tool],
        context: RunContext,
        parent_id: str,
        saver: _Saver,
    ) -> EngineResponse:
        """Run every action of `request` concurrently; failures become error responses."""
        responses: list[ActionResponse | None] = [None] * len(request.actions)

        async def run_one(index: int, action: Action) -> None:
            if saver.journal is None:
                responses[index] = await self._run_action(action, tools, context, parent_id, saver)
                return

            async def run() -> JsonValue:
                done = await self._run_action(action, tools, context, parent_id, saver)
                return done.model_dump(mode="json")

            name = f"tool {action.item_index} {action.tool_call_id}"
            recorded = await saver.journal.record(name, run)
            responses[index] = ActionResponse.model_validate(recorded)

        try:
            async with anyio.create_task_group() as tg:
                for index, action in enumerate(request.actions):
                    tg.start_soon(run_one, index, action)
        except BaseExceptionGroup as group:
            # What escapes an action is a signal for the whole run (a stop, a pause for the
            # client's answer): let it arrive as itself, not wrapped, however deep it began.
            leaves = _leaves(group)
            if len(leaves) == 1:
                raise leaves[0] from None
            raise
        done = [r for r in responses if r is not None]
        return EngineResponse(action_responses=done, metadata=request.metadata)

    async def _run_action(
        self,
        action: Action,
        tools: Mapping[str, Tool],
        context: RunContext,
        parent_id: str,
        saver: _Saver,
    ) -> ActionResponse:
        tool = tools.get(action.tool)
        tracer = context.tracer
        if tool is None or tool.source_node != action.node:
            # A stored run resumed on a gateway whose nodes changed: the model is told so.
            async with tracer.span(
                "tool", action.tool, parent_id=parent_id, input=action.input,
                call_id=action.tool_call_id,
            ) as span:  # fmt: skip
                span.fail(f"tool {action.tool!r} is not offered by node {action.node!r}")
            return ActionResponse(action=action, error=span.error)
        arguments = split_routed_input(tool, action.input)
        if action.node in self.agents:
            # An agent used as a tool resolves its run right here, inside this call. It takes
            # no limiter slot: its own tool calls do, and holding one here could deadlock.
            async with tracer.span(
                "tool", action.tool, parent_id=parent_id, input=arguments,
                call_id=action.tool_call_id,
            ) as span:  # fmt: skip
                try:
                    response = await self._run_agent_tool(
                        action, arguments, context, span.id, saver
                    )
                except (AgentError, ToolkitError, GatewayError) as exc:
                    # The inner agent failed (its model, say): for the caller it is a failed tool.
                    response = ActionResponse(action=action, error=str(exc) or repr(exc))
                span.output, span.error = response.data, response.error
                return response
        try:
            call = await self._call_node(
                tool,
                arguments,
                tracer,
                parent_id,
                context.quota,
                meta=context.call_meta(),
                agent=context,
                call_id=action.tool_call_id,
            )
        except Exception as exc:  # a failing tool never fails the run
            return ActionResponse(action=action, error=str(exc) or type(exc).__name__)
        return ActionResponse(action=action, data=call.data, error=call.error, usage=call.usage)

    async def _run_agent_tool(
        self,
        action: Action,
        arguments: Mapping[str, Any],
        context: RunContext,
        parent_id: str,
        saver: _Saver,
    ) -> ActionResponse:
        inner = self.agents[action.node]
        if inner.name in context.chain:
            cycle = " -> ".join((*context.chain, inner.name))
            return ActionResponse(action=action, error=f"agent cycle refused: {cycle}")
        if context.depth >= self.max_depth:
            chain = " -> ".join((*context.chain, inner.name))
            return ActionResponse(
                action=action,
                error=f"agent depth limit ({self.max_depth}) reached: {chain}",
            )
        prompt = arguments.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return ActionResponse(action=action, error="`prompt` must be a non-empty string")
        saved = saver.state.children.get(action.tool_call_id)
        state = (
            saved  # a stored run stopped while this agent worked: go on where it was
            if saved is not None and saved.agent == inner.name
            else RunState(
                run_id=context.tracer.run_id,
                agent=inner.name,
                items=[AgentItem(prompt=prompt)],
                started_by=context.tracer.subject,
            )
        )
        checkpoint = saver.child(action.tool_call_id)
        journal = saver.journal.child(action.tool_call_id) if saver.journal else None
        outcome = await self._drive(
            inner, state, context, parent_id, checkpoint=checkpoint, journal=journal
        )
        item = outcome.items[0]
        if item.error is not None:
            return ActionResponse(action=action, error=item.error, usage=outcome.usage)
        return ActionResponse(action=action, data={"response": item.output}, usage=outcome.usage)

    def _check_hops(self, hops: int) -> None:
        if hops >= self.max_depth:
            raise DepthExceeded(
                f"refused: the request already passed through {hops} gateways "
                f"(depth limit {self.max_depth}); is a gateway calling itself?"
            )

    def _agent(self, name: str) -> AgentSpec:
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UnknownAgent(f"no agent named {name!r} (configured: {known})") from None


def _definition(tool: Tool) -> ToolDefinition:
    schema: dict[str, Any] = dict(tool.input_schema)
    return ToolDefinition(
        name=tool.name,
        description=tool.description,
        input_schema=schema,
        source_node=tool.source_node,
        is_from_toolkit=tool.is_from_toolkit,
    )


async def _trace_answered(tracer: Tracer, parent_id: str, request: EngineRequest) -> None:
    """A tool span for each call the agent answered itself (an unknown tool, bad arguments, a
    repeated call), closed at once with what the model was told."""
    if not tracer.hooks:
        return
    metadata = request.metadata
    running = {action.tool_call_id for action in request.actions}
    for index, message in metadata.pending.items():
        steps = {step.tool_call_id: step for step in metadata.previous_steps.get(index, ())}
        for call in message.tool_calls:
            step = steps.get(call.id)
            if step is None or call.id in running:
                continue
            said: JsonValue = (
                call.arguments if call.invalid_arguments is None else call.invalid_arguments
            )
            async with tracer.span(
                "tool", call.name, parent_id=parent_id, input=said, call_id=call.id
            ) as span:
                if step.observation.startswith(ERROR_PREFIX):
                    span.fail(step.observation.removeprefix(ERROR_PREFIX))
                else:
                    span.output = step.observation


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            leaves += _leaves(cast(BaseExceptionGroup[BaseException], exc))
        else:
            leaves.append(exc)
    return leaves


class _Saver:
    """A run's latest state, handed to its checkpoint on every change. Agents running as its
    tools save their own states into it (`children`), so the outer checkpoint holds them."""

    def __init__(
        self, state: RunState, checkpoint: Checkpoint | None, journal: ScopedJournal | None = None
    ) -> None:
        self.state = state
        self._checkpoint = checkpoint
        self.journal = journal

    async def save(self, **update: Any) -> None:
        self.state = self.state.model_copy(update=update)
        if self._checkpoint is not None:
            await self._checkpoint(self.state)

    def child(self, call_id: str) -> Checkpoint | None:
        if self._checkpoint is None:  # nobody stores this run: its children need not save
            return None

        async def save_child(child: RunState) -> None:
            await self.save(children={**self.state.children, call_id: child})

        return save_child


def _model_for(spec: AgentSpec, context: RunContext) -> ChatModel:
    """The agent's own model; an agent on the client's model (sampling) gets the run's."""
    if isinstance(spec.model, ClientSampling) and context.client_model is not None:
        return context.client_model
    return spec.model


@dataclass(frozen=True, slots=True)
class _NodeCall:
    result: CallToolResult
    data: JsonValue = None
    """What the model reads of a result that is not an error."""
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    """What answering the server's sampling requests cost."""


def _output_cap(node: Toolkit) -> int:
    """Characters of a result the model reads: the server's own cap for MCP nodes."""
    return node.max_output if isinstance(node, McpToolkit) else DEFAULT_MAX_CHARS


def _agent_tool(spec: AgentSpec) -> Tool:
    return Tool(
        name=spec.name,
        description=spec.description or f"Ask the {spec.name} agent.",
        input_schema={
            "type": "object",
            "properties": {"prompt": {"type": "string", "description": "What to ask the agent"}},
            "required": ["prompt"],
        },
        source_node=spec.name,
        is_from_toolkit=False,
    )


def _outputs(items: Sequence[ItemResult]) -> JsonValue:
    return [
        {"output": item.output} if item.error is None else {"error": item.error} for item in items
    ]
