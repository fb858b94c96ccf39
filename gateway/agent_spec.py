"""An agent the gateway can run, as configured, and as a node whose one tool is itself."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent import AgentItem, AgentOptions, ChatMemory, ChatModel
from agent.system_prompt import SystemPrompt
from toolkits import Tool
from toolkits.observation import DEFAULT_MAX_CHARS, truncate

from .agent_tool import AGENT_INPUT_SCHEMA, agent_description
from .approval import ApprovalRule

__all__ = ["AgentNode", "AgentSpec", "agent_as_tool", "check_memory"]


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """An agent the gateway can run: its model, the nodes whose tools it may call, options."""

    name: str
    model: ChatModel
    tools: Sequence[str] = ()
    options: AgentOptions = field(default_factory=AgentOptions)
    description: str = ""
    token_budget: int | None = None
    """Tokens the whole run tree may spend (this agent and every agent it calls); called as a
    tool, its subtree, within its caller's budget."""
    memory: ChatMemory | None = None
    """Where this agent keeps conversations; default: the gateway's."""
    context_window: int | None = None
    """Tokens the model's context holds, when its provider does not report it: a call that
    would not fit fails before it is sent."""
    approval: ApprovalRule = field(default_factory=ApprovalRule)
    """Which of its tool calls a person must approve (globs over `approval_names`)."""
    handoffs: Sequence[str] = ()
    """Agents it may hand the conversation to (see README, "Handoffs"): offered as its tools
    (added to `tools` when not there), a call of one ends its item with that agent's answer."""
    handoff_history: bool = True
    """Whether the agents it hands the conversation to read the conversation before the user's
    message (its session's earlier turns, or the item's history) and this agent's calls of the
    turn, with their results; False: the message alone."""
    max_output: int = DEFAULT_MAX_CHARS
    """Characters of its answer a calling agent's model reads, as of any tool's result."""

    def __post_init__(self) -> None:
        missing = [name for name in self.handoffs if name not in self.tools]
        if missing:  # a handoff is one of its tools: every use of `tools` sees it
            object.__setattr__(self, "tools", (*self.tools, *missing))

    def answer_for_caller(self, answer: str | None) -> str | None:
        """Its `answer` as a calling agent reads it (and its run records it): cut at
        `max_output`, with the notice a cut tool result has."""
        return answer if answer is None else truncate(answer, self.max_output)

    def tool_description(self) -> str:
        """What a caller (a model, an MCP client) reads of this agent as a tool."""
        return agent_description(
            self.name,
            self.description,
            tools=self.tools,
            instructions=_text_of(self.options.system_message),
        )


@dataclass(frozen=True, slots=True)
class AgentNode:
    """An agent listed among the nodes: its one tool is the agent itself."""

    spec: AgentSpec

    @property
    def name(self) -> str:
        return self.spec.name

    async def list_tools(self) -> Sequence[Tool]:
        return [agent_as_tool(self.spec)]


def _text_of(system_message: str | SystemPrompt) -> str:
    """A system message's text, for a description: none for one made per run."""
    return system_message if isinstance(system_message, str) else ""


def agent_as_tool(spec: AgentSpec) -> Tool:
    return Tool(
        name=spec.name,
        description=spec.tool_description(),
        input_schema=AGENT_INPUT_SCHEMA,
        source_node=spec.name,
        is_from_toolkit=False,
    )


def check_memory(spec: AgentSpec, items: Sequence[AgentItem], memory: ChatMemory | None) -> None:
    """Raises `ValueError` for items with a `session_id` when `spec` has no chat memory, its
    own nor the gateway's (`memory`): their conversation would be kept nowhere."""
    session = next((item.session_id for item in items if item.session_id is not None), None)
    if session is not None and spec.memory is None and memory is None:
        raise ValueError(
            f"session_id {session!r}: agent {spec.name!r} has no chat memory to keep it in: "
            "give the Gateway one (Gateway(..., memory=SessionMemory(InProcessStore())), or "
            "SQLiteStore, store_from_url(URL)) or the agent its own (AgentSpec(memory=...))"
        )
