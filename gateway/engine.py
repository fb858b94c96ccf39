"""The engine: runs agents, dispatching their requests to tool nodes.

A run alternates between the agent's pure `step` and the dispatch of the `EngineRequest` it
returns: every action goes to its node concurrently (bounded by one limiter per gateway), and
each result or failure becomes an action response. The run's whole state is a `RunState`,
handed to an optional checkpoint after every step, from which `Gateway.resume` continues in
any process.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from mcp_types import CallToolResult
from pydantic import BaseModel, ConfigDict, JsonValue

from agent import (
    Action,
    ActionResponse,
    AgentItem,
    AgentOptions,
    AgentResult,
    ChatMemory,
    ChatModel,
    EngineRequest,
    EngineResponse,
    ItemResult,
    ToolDefinition,
    ToolsAgent,
    Usage,
)
from toolkits import Tool, Toolkit, result_data, result_text, split_routed_input

from .errors import ConfigError, ToolConflict, UnknownAgent, UnknownTool
from .trace import TraceHook, Tracer, new_id
from .traced_model import TracedModel

__all__ = ["AgentSpec", "Checkpoint", "Gateway", "RunResult", "RunState"]

RUN_STATE_VERSION = 1


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent the gateway can run: its model, the nodes whose tools it may call, options."""

    name: str
    model: ChatModel
    tools: Sequence[str] = ()
    options: AgentOptions = field(default_factory=AgentOptions)
    description: str = ""


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
        max_concurrency: int = 8,
        hooks: Sequence[TraceHook] = (),
    ) -> None:
        self.nodes: dict[str, Toolkit] = {node.name: node for node in nodes}
        self.agents: dict[str, AgentSpec] = {spec.name: spec for spec in agents}
        self.memory = memory
        self.hooks = tuple(hooks)
        self._limiter = anyio.CapacityLimiter(max_concurrency)

    async def run(
        self,
        agent: str,
        prompt: str | Sequence[AgentItem],
        *,
        session_id: str | None = None,
        checkpoint: Checkpoint | None = None,
        hooks: Sequence[TraceHook] = (),
        model: ChatModel | None = None,
    ) -> RunResult:
        """Run `agent` on one prompt (or several items) to the end.

        `hooks` are added to the gateway's for this run; `model` replaces the agent's model for
        this run (e.g. the calling MCP client's own model, through sampling).
        """
        items = (
            [AgentItem(prompt=prompt, session_id=session_id)]
            if isinstance(prompt, str)
            else list(prompt)
        )
        state = RunState(run_id=new_id(), agent=agent, items=items)
        return await self.resume(state, checkpoint=checkpoint, hooks=hooks, model=model)

    async def resume(
        self,
        state: RunState,
        *,
        checkpoint: Checkpoint | None = None,
        hooks: Sequence[TraceHook] = (),
        model: ChatModel | None = None,
    ) -> RunResult:
        """Continue a run from a stored state (or start one that has not stepped yet)."""
        spec = self._agent(state.agent)
        tools = await self.tools_for(spec)
        tracer = Tracer(state.run_id, (*self.hooks, *hooks))
        summary: dict[str, JsonValue] = {"agent": spec.name, "items": len(state.items)}
        prompt: JsonValue = state.items[0].prompt if len(state.items) == 1 else summary
        async with (
            tracer.span(
                "run", spec.name, parent_id=None, input=prompt, span_id=state.run_id
            ) as run_span,
            tracer.span("agent", spec.name, parent_id=state.run_id) as agent_span,
        ):
            agent = ToolsAgent(
                model=TracedModel(model or spec.model, tracer, agent_span.id),
                tools=[_definition(tool) for tool in tools.values()],
                options=spec.options,
                memory=self.memory,
            )
            request, response = state.request, state.response
            while True:
                if request is None:
                    outcome = await agent.step(state.items, response)
                    if isinstance(outcome, AgentResult):
                        break
                    request, response = outcome, None
                    state = state.model_copy(update={"request": request, "response": None})
                    if checkpoint:
                        await checkpoint(state)
                response = await self.dispatch(request, tools, tracer, agent_span.id)
                request = None
                state = state.model_copy(update={"request": None, "response": response})
                if checkpoint:
                    await checkpoint(state)
            agent_span.output = run_span.output = _outputs(outcome.items)
        return RunResult(
            run_id=state.run_id,
            agent=spec.name,
            items=outcome.items,
            usage=outcome.usage,
            iterations=outcome.iterations,
        )

    async def tools_for(self, spec: AgentSpec) -> dict[str, Tool]:
        """The tools an agent may call, by the name the model sees."""
        return await self._tools_of(spec.tools, f"agent {spec.name!r}")

    async def list_tools(self) -> dict[str, Tool]:
        """Every tool of every node, by the name the model sees."""
        return await self._tools_of(list(self.nodes), "the gateway")

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any], *, hooks: Sequence[TraceHook] = ()
    ) -> CallToolResult:
        """One tool call outside any agent, traced like an agent's."""
        tools = await self.list_tools()
        tool = tools.get(name)
        if tool is None:
            raise UnknownTool(f"no tool named {name!r} (available: {', '.join(sorted(tools))})")
        tracer = Tracer(new_id(), (*self.hooks, *hooks))
        async with (
            self._limiter,
            tracer.span("tool", name, parent_id=None, input=dict(arguments)) as span,
        ):
            result = await self.nodes[tool.source_node].call_tool(name, arguments)
            span.output = result_data(result)
            return result

    async def _tools_of(self, node_names: Sequence[str], owner: str) -> dict[str, Tool]:
        listed: dict[str, Sequence[Tool]] = {}

        async def list_node(name: str) -> None:
            listed[name] = await self.nodes[name].list_tools()

        missing = [name for name in node_names if name not in self.nodes]
        if missing:
            raise ConfigError(f"{owner} uses nodes that are not configured: {missing}")
        async with anyio.create_task_group() as tg:
            for name in node_names:
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

    async def dispatch(
        self,
        request: EngineRequest,
        tools: Mapping[str, Tool],
        tracer: Tracer,
        parent_id: str | None,
    ) -> EngineResponse:
        """Run every action of `request` concurrently; failures become error responses."""
        responses: list[ActionResponse | None] = [None] * len(request.actions)

        async def run_one(index: int, action: Action) -> None:
            responses[index] = await self._run_action(action, tools, tracer, parent_id)

        async with anyio.create_task_group() as tg:
            for index, action in enumerate(request.actions):
                tg.start_soon(run_one, index, action)
        done = [r for r in responses if r is not None]
        return EngineResponse(action_responses=done, metadata=request.metadata)

    async def _run_action(
        self, action: Action, tools: Mapping[str, Tool], tracer: Tracer, parent_id: str | None
    ) -> ActionResponse:
        tool = tools.get(action.tool)
        node = self.nodes.get(action.node)
        if tool is None or node is None or tool.source_node != action.node:
            error = f"tool {action.tool!r} is not offered by node {action.node!r}"
            return ActionResponse(action=action, error=error)
        arguments = split_routed_input(tool, action.input)
        async with (
            self._limiter,
            tracer.span("tool", action.tool, parent_id=parent_id, input=arguments) as span,
        ):

            async def progress(done: float, total: float | None, message: str | None) -> None:
                await tracer.note(
                    "tool",
                    action.tool,
                    span.id,
                    "progress",
                    progress=done,
                    total=total,
                    message=message,
                )

            try:
                result = await node.call_tool(action.tool, arguments, on_progress=progress)
            except Exception as exc:  # a failing tool never fails the run
                span.fail(str(exc) or type(exc).__name__)
                return ActionResponse(action=action, error=span.error)
            if result.is_error:
                span.fail(result_text(result) or "the tool reported an error")
                return ActionResponse(action=action, error=span.error)
            span.output = result_data(result)
            return ActionResponse(action=action, data=span.output)

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


def _outputs(items: Sequence[ItemResult]) -> JsonValue:
    return [
        {"output": item.output} if item.error is None else {"error": item.error} for item in items
    ]
