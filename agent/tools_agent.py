"""The Tools Agent as a pure, resumable step.

`ToolsAgent.step(items, response)` calls the model once for every unfinished item and returns
either an `AgentResult` (every item finished) or an `EngineRequest` for the engine to run. It
never runs a tool; everything it must remember travels in the request's metadata.

Calls the agent answers itself, without the engine: an unknown tool, arguments that are not a
JSON object, and a call repeated once too often. The model may repeat a call once (a clock or a
search may answer differently the second time); the second repeat of the identical call (same
tool, same arguments) and every later one are not run again: the observation says so and gives
the result the model already has. Repeats are counted against calls that already finished.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from .memory import ChatMemory
from .messages import (
    AssistantMessage,
    ChatMessage,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    UserMessage,
)
from .model import ChatModel
from .protocol import (
    Action,
    AgentItem,
    AgentRequestMetadata,
    AgentResult,
    EngineRequest,
    EngineResponse,
    ItemResult,
    ToolCallStep,
)
from .scratchpad import ERROR_PREFIX, build_steps, scratchpad_messages, tool_usage

__all__ = ["DEFAULT_SYSTEM_MESSAGE", "ROUTING_KEY", "AgentOptions", "ToolsAgent"]

DEFAULT_SYSTEM_MESSAGE = "You are a helpful assistant"
ROUTING_KEY = "tool"
"""A call routed to a toolkit node names its tool in this input field."""


@dataclass(frozen=True, slots=True)
class AgentOptions:
    system_message: str = DEFAULT_SYSTEM_MESSAGE
    max_iterations: int = 10
    return_intermediate_steps: bool = False

    def __post_init__(self) -> None:
        if self.max_iterations < 1:
            raise ValueError("max_iterations must be at least 1")


@dataclass(frozen=True, slots=True)
class ToolsAgent:
    model: ChatModel
    tools: Sequence[ToolDefinition] = ()
    options: AgentOptions = field(default_factory=AgentOptions)
    memory: ChatMemory | None = None

    async def step(
        self, items: Sequence[AgentItem], response: EngineResponse | None = None
    ) -> AgentResult | EngineRequest:
        """Advance every unfinished item by one model call.

        Raises `agent.errors.ModelError` when the model fails; the response passed in stays
        valid, so the step can be retried.
        """
        state = response.metadata if response else AgentRequestMetadata()
        if state.iteration_count >= self.options.max_iterations:
            return self.stop(items, response, self._max_iterations_error())
        finished = dict(state.finished_items)
        previous_steps: dict[int, list[ToolCallStep]] = {}
        pending: dict[int, AssistantMessage] = {}
        actions: list[Action] = []
        usage = state.usage + tool_usage(response)

        for index, item in enumerate(items):
            if index in finished:
                continue
            steps = build_steps(response, index)
            answer = await self.model.invoke(await self._messages(item, steps), self.tools)
            usage += answer.usage
            if not answer.tool_calls:
                if self.memory is not None and item.session_id is not None:
                    await self.memory.save(item.session_id, item.prompt, answer.content)
                keep = self.options.return_intermediate_steps
                finished[index] = ItemResult(output=answer.content, steps=steps if keep else None)
                continue
            answer = _with_unique_call_ids(answer, steps)
            answered_here, item_actions = self._plan(answer, index, steps)
            previous_steps[index] = steps + answered_here
            pending[index] = answer
            actions += item_actions

        if len(finished) == len(items):
            results = [finished[i] for i in range(len(items))]
            return AgentResult(items=results, usage=usage, iterations=state.iteration_count + 1)
        metadata = AgentRequestMetadata(
            previous_steps=previous_steps,
            pending=pending,
            iteration_count=state.iteration_count + 1,
            finished_items=finished,
            usage=usage,
        )
        return EngineRequest(actions=actions, metadata=metadata)

    def stop(
        self, items: Sequence[AgentItem], response: EngineResponse | None, error: str
    ) -> AgentResult:
        """End the run now: unfinished items fail with `error` and keep their steps so far."""
        state = response.metadata if response else AgentRequestMetadata()
        results = [
            state.finished_items.get(index)
            or ItemResult(error=error, steps=build_steps(response, index))
            for index in range(len(items))
        ]
        usage = state.usage + tool_usage(response)
        return AgentResult(items=results, usage=usage, iterations=state.iteration_count)

    async def _messages(self, item: AgentItem, steps: list[ToolCallStep]) -> list[ChatMessage]:
        history: list[ChatMessage] = []
        if self.memory is not None and item.session_id is not None:
            history = await self.memory.load(item.session_id)
        return [
            SystemMessage(content=self.options.system_message),
            *history,
            UserMessage(content=item.prompt),
            *scratchpad_messages(steps),
        ]

    def _plan(
        self, answer: AssistantMessage, index: int, steps: Sequence[ToolCallStep]
    ) -> tuple[list[ToolCallStep], list[Action]]:
        """Actions for the calls the engine must run; steps for those answered right here."""
        by_name = {tool.name: tool for tool in self.tools}
        answered: list[ToolCallStep] = []
        actions: list[Action] = []
        for call in answer.tool_calls:
            tool = by_name.get(call.name)
            problem = self._call_problem(call, tool)
            said = (
                f"{ERROR_PREFIX}{problem}" if problem is not None else _repeat_notice(call, steps)
            )
            if said is not None or tool is None:
                answered.append(
                    ToolCallStep(
                        tool_call_id=call.id,
                        tool=call.name,
                        tool_input=call.arguments,
                        observation=said or "",
                        message=answer,
                    )
                )
                continue
            node_input = dict(call.arguments)
            if tool.is_from_toolkit:
                node_input[ROUTING_KEY] = call.name
            actions.append(
                Action(
                    node=tool.source_node,
                    input=node_input,
                    tool_call_id=call.id,
                    item_index=index,
                    tool=call.name,
                )
            )
        return answered, actions

    def _call_problem(self, call: ToolCall, tool: ToolDefinition | None) -> str | None:
        if tool is None:
            # Never drop the call: the model learns what exists and can try again.
            names = ", ".join(t.name for t in self.tools)
            available = f"Available tools: {names}." if names else "This agent has no tools."
            return f"there is no tool named {call.name!r}. {available}"
        if call.invalid_arguments is not None:
            return (
                f"the arguments for {call.name!r} were not a JSON object: "
                f"{call.invalid_arguments[:500]!r}. Call it again with valid JSON arguments."
            )
        return None

    def _max_iterations_error(self) -> str:
        n = self.options.max_iterations
        return (
            f"Max iterations ({n}) reached. "
            "The agent could not complete the task within the allowed number of iterations."
        )


REPEATS_RUN = 1
"""How many times an identical call (same tool, same arguments) is run again before the agent
answers it with the result the model already has."""
REPEAT_NOTICE = "Not run again:"


def _repeat_notice(call: ToolCall, steps: Sequence[ToolCallStep]) -> str | None:
    """The observation for a call repeated too often, or None when it may run."""
    same = [s for s in steps if s.tool == call.name and s.tool_input == call.arguments]
    if len(same) <= REPEATS_RUN:
        return None
    ran = [s for s in same if not s.observation.startswith(REPEAT_NOTICE)]
    result = ran[-1].observation if ran else same[-1].observation
    return (
        f"{REPEAT_NOTICE} you already called {call.name!r} with these exact arguments "
        f"{len(same)} times. Its result was: {result}\n"
        "Use that result, or call with different arguments."
    )


def _with_unique_call_ids(answer: AssistantMessage, steps: list[ToolCallStep]) -> AssistantMessage:
    """Give every call an id no earlier call used: results are matched to calls by id."""
    used = {step.tool_call_id for step in steps}
    fresh = (f"call_{n}" for n in itertools.count(len(used) + 1))
    calls: list[ToolCall] = []
    changed = False
    for call in answer.tool_calls:
        if not call.id or call.id in used:
            call = call.model_copy(update={"id": next(i for i in fresh if i not in used)})
            changed = True
        used.add(call.id)
        calls.append(call)
    return answer.model_copy(update={"tool_calls": tuple(calls)}) if changed else answer
