"""The engine: the gateway's named tool nodes and agents, composed.

`Gateway` holds the registry (nodes, agents, limits), lists the tools an agent may call, and
is the one way a node's tool is called (bounded, traced). What an agent is, is `agent_spec`'s;
running an agent step by step is
the `step_loop`'s; what a run stores and returns is the `run_state`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp_types import CallToolResult, LoggingMessageNotificationParams
from pydantic import JsonValue

from agent import AgentItem, ChatMemory, ChatModel, MediaPart, Usage
from toolkits import (
    CallContext,
    CallInfo,
    HasHealth,
    HasIdleTimeout,
    HasOutputCap,
    HasSamplingCap,
    KnowsRenames,
    ListsAtHand,
    McpToolkit,
    Tool,
    Toolkit,
    observed_text,
    result_data,
    result_media,
)
from toolkits.mcp import DEFAULT_MAX_SAMPLING, readable_result
from toolkits.observation import DEFAULT_MAX_CHARS

from .agent_answers import ModelAnswers
from .agent_spec import AgentNode, AgentSpec, agent_as_tool, check_memory
from .agent_tool import answer_data, reported_usage
from .approval import ApprovalRule, Approver, agent_rule_of, node_rule_of
from .call_info import with_context
from .catalog import claim, list_each, same_objects
from .errors import ConfigError, DepthExceeded, UnknownAgent, UnknownTool
from .item_results import outputs
from .journal import Journal, ScopedJournal
from .limits import DEFAULT_CLIENT_LIMIT, DEFAULT_NODE_LIMIT, NodeLimit, NodeLimits, PerNode
from .loops import LoopGuard, new_gateway_id
from .node_rules import approvals_of, limits_of
from .node_slots import Leases, taken
from .registry import by_name
from .remote_approvals import RemoteApprovals
from .run_context import HOPS_META_KEY, UNATTENDED, ClientQuestions, RunContext, TokenBudget
from .run_state import Checkpoint, RunResult, RunState, spent
from .step_loop import StepLoop
from .trace import ToolProgress, TraceHook, Tracer, new_id
from .traced_model import TracedModel

__all__ = ["AgentSpec", "Gateway", "NodeCall"]


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
        approvals: Mapping[str, ApprovalRule] | None = None,
        gateway_id: str | None = None,
    ) -> None:
        """Each node and agent has a name of its own (`ConfigError` otherwise). A node's own
        `max_concurrency` and approval rule (an MCP server's keys: `HasCallRules`) apply:
        `node_limits` replaces a node's limit, `approvals` adds to its rule (`node_rules`).
        `gateway_id`: this gateway's id in the tools it serves (`loops`); default a new
        random one. Two gateways given one id take each other's tools for their own."""
        self.nodes, self.agents = by_name(nodes, agents)
        self.memory = memory
        self.hooks = tuple(hooks)
        self.max_depth = max_depth
        """How many agents deep a run may nest (agents calling agents as tools), and how many
        gateways a request may pass through."""
        self.gateway_id = gateway_id or new_gateway_id()
        """This gateway's id, in the `_meta` of the tools it serves (`loops`)."""
        self._loops = LoopGuard(self.gateway_id)
        self.approvals = approvals_of(list(self.nodes.values()), approvals)
        """Nodes whose tools need a person's approval, by node (globs over `approval_names`):
        each node's own rule (`HasCallRules`) with what `approvals` adds (`node_rules`)."""
        self.max_concurrency = max_concurrency
        """Calls one client (a run, or an MCP client's connection) may have in flight per node."""
        # A call waits for a slot of a server as long as it may go without a sign of life.
        waits = {
            n.name: n.idle_timeout for n in self.nodes.values() if isinstance(n, HasIdleTimeout)
        }
        limits = limits_of(list(self.nodes.values()), node_limits)
        self._node_limits = NodeLimits(DEFAULT_NODE_LIMIT, limits, waits)
        self._leases = Leases()
        """The slots held by calls to other gateways, lent to the calls coming back."""
        self._steps = StepLoop(self)
        self._listed: dict[tuple[str, ...], tuple[list[Sequence[Tool]], dict[str, Tool]]] = {}
        """The last tools of each set of nodes, by the listings they were made of."""
        self._at_hand = {n.name: n for n in self.nodes.values() if isinstance(n, ListsAtHand)}
        """The nodes that can tell their tools without waiting (checked once: an `isinstance`
        of a protocol costs microseconds on Python 3.11)."""
        self._agent_listings: dict[str, tuple[AgentSpec, tuple[Tool]]] = {}
        """Each agent's one tool, while it is that agent."""

    def client_quota(self) -> PerNode:
        """A fresh client's share of the nodes, within the nodes' own limits (see `limits`)."""
        return PerNode(self.max_concurrency, self._node_limits)

    def node_limit(self, node: str) -> NodeLimit:
        """How many calls `node` takes at once, from every client, and who waits (see `limits`)."""
        return self._node_limits.of(node)

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
        approver: Approver | None = None,
        questions: ClientQuestions | str = UNATTENDED,
        context: Mapping[str, JsonValue] | None = None,
    ) -> RunResult:
        """Run `agent` on one prompt (or several items) to the end.

        `hooks` are added to the gateway's for this run; `model` replaces the agent's model for
        this run (e.g. the calling MCP client's own model, through sampling); `hops` is how many
        gateways the request already passed through (served runs read it from `_meta`);
        `stream` asks every model of the run to stream, each text delta a `token` event;
        `quota` is the calling client's share of the nodes (default: the run's own).
        `started_by` is who asked (recorded on the state and every trace event; its chat
        memory sessions are its own, see `session_owners`); `approver`
        decides on the calls that need a person's approval (`gateway.approval`); `questions`
        answers the elicitations of its tools' servers (the MCP client attending a served run),
        or says why nobody can. A `session_id` continues that conversation in the agent's chat
        memory: `ValueError` when it has none (see `resume`). `context` (a JSON object) is the
        run's context, for the system message's placeholders and the local tools that take a
        `CallInfo`: every item's that has none of its own. It is stored with the run.
        """
        if not isinstance(prompt, str) and session_id is not None:
            raise ValueError("session_id goes with a prompt; items carry their own session_id")
        items = (
            [AgentItem(prompt=prompt, session_id=session_id)]
            if isinstance(prompt, str)
            else list(prompt)
        )
        if not items:
            raise ValueError("no items to run: give a prompt, or one item or more")
        items = with_context(items, context)
        state = RunState(run_id=new_id(), agent=agent, items=items, started_by=started_by)
        return await self.resume(
            state,
            checkpoint=checkpoint,
            hooks=hooks,
            model=model,
            hops=hops,
            stream=stream,
            quota=quota,
            approver=approver,
            questions=questions,
        )

    async def resume(
        self,
        state: RunState,
        *,
        checkpoint: Checkpoint | None = None,
        hooks: Sequence[TraceHook] = (),
        model: ChatModel | None = None,
        hops: int = 0,
        lent: Sequence[str] = (),
        stream: bool = False,
        quota: PerNode | None = None,
        journal: Journal | None = None,
        approver: Approver | None = None,
        questions: ClientQuestions | str = UNATTENDED,
        pausing: Callable[[], str | None] | None = None,
        client_model: ChatModel | None = None,
    ) -> RunResult:
        """Continue a run from a stored state (or start one that has not stepped yet).

        With a `journal`, every model and tool call is recorded there, and one it already
        holds is answered from it, not made again. A call that needs approval waits for the
        `approver`'s decision (without one, it is refused). `lent`: the slots its request's
        callers lent it (`node_slots`, read from `_meta` with `hops`). `pausing`: asked when
        the run is cancelled, what it was stopped to wait for, if that is why (its spans end
        as paused, not failed: `Tracer.pausing`). `client_model`: the calling MCP client's
        own model, for the agents of the tree on `model = "sampling"` (by default `model`).
        Raises `DepthExceeded` when `hops` already reaches the depth limit, `ValueError` for
        an item with a `session_id` when the agent has no chat memory (neither its own nor
        the gateway's): its conversation would be kept nowhere.
        """
        spec = self._agent(state.agent)
        self.check_hops(hops)
        check_memory(spec, state.items, self.memory)
        tracer = Tracer(
            state.run_id,
            (*self.hooks, *hooks),
            subject=state.started_by,
            caller_trace=state.caller_trace,
            pausing=pausing,
        )
        # A resumed run has spent what its state says (its sub-agents' calls included): the
        # budget counts on from there.
        budget = TokenBudget(spec.token_budget, spent(state))
        quota = quota or self.client_quota()
        context = RunContext(
            tracer,
            budget,
            quota,
            hops=hops,
            lent=tuple(lent),
            client_model=client_model or model,
            stream=stream,
            approver=approver,
            questions=questions,
        )
        summary: dict[str, JsonValue] = {"agent": spec.name, "items": len(state.items)}
        prompt: JsonValue = state.items[0].prompt if len(state.items) == 1 else summary
        async with tracer.span(
            "run", spec.name, parent_id=None, input=prompt, span_id=state.run_id
        ) as run_span:
            outcome = await self._steps.drive(
                spec,
                state,
                context,
                state.run_id,
                checkpoint=checkpoint,
                model=model,
                journal=ScopedJournal(journal) if journal is not None else None,
            )
            run_span.output = outputs(outcome.items)
        return RunResult(
            run_id=state.run_id,
            agent=spec.name,
            items=outcome.items,
            usage=outcome.usage,
            iterations=outcome.iterations,
        )

    def not_ready(self, tool: str, nodes: Collection[str]) -> str | None:
        """The health of the node of `nodes` that `tool` is named after (`NODE__TOOL`), if it
        is not ready: its tools are not listed, so a call of one finds no such tool."""
        node, separator, _ = tool.partition("__")
        if not separator or node not in nodes:
            return None
        return self.unhealthy([node]).get(node)

    def renamed(self, tool: str, nodes: Collection[str]) -> str | None:
        """For a call of `tool`, a name one tool of `nodes` had until it was renamed
        (`prefix="auto"`/`"never"` names follow which servers are up): its name now, as a
        did-you-mean. None if no tool, or several, had that name."""
        found = {
            name
            for node in (self.nodes.get(n) for n in nodes)
            if isinstance(node, KnowsRenames) and (name := node.now_named(tool)) is not None
        }
        if len(found) != 1:
            return None
        return (
            f"there is no tool named {tool!r} now: did you mean {found.pop()!r}? (it was "
            "renamed when another server came or went)"
        )

    def unhealthy(self, node_names: Sequence[str]) -> dict[str, str]:
        """The named nodes that are not ready, with their health (their tools are missing)."""
        nodes = (self.nodes.get(name) for name in node_names)
        return {
            n.name: str(n.health)
            for n in nodes
            if isinstance(n, HasHealth) and n.health.state != "ready"
        }

    def needs_approval(self, spec: AgentSpec, tool: Tool) -> bool:
        """Whether a person must approve `spec`'s calls of `tool` (`gateway.approval`)."""
        return self.approval_rule(spec, tool) is not None

    def approval_rule(self, spec: AgentSpec, tool: Tool) -> str | None:
        """The rule that makes a person approve `spec`'s calls of `tool`, named (the agent's
        own first, else its node's); None if no rule does."""
        return agent_rule_of(spec.approval, spec.name, tool) or self.node_rule(tool)

    def node_rule(self, tool: Tool) -> str | None:
        """The rule of `tool`'s node that makes a person approve each call of it, whoever
        calls (an agent, or an MCP client in proxy mode), named for a message; None if none."""
        return node_rule_of(self.approvals.get(tool.source_node), tool)

    async def tools_for(self, spec: AgentSpec) -> dict[str, Tool]:
        """The tools an agent may call, by the name the model sees."""
        return await self.tools_of(spec.tools, f"agent {spec.name!r}")

    async def list_tools(self) -> dict[str, Tool]:
        """Every tool of every node, by the name the model sees."""
        return await self.tools_of(list(self.nodes), "the gateway")

    async def call_tool(
        self,
        tool: str | Tool,
        arguments: Mapping[str, Any],
        *,
        hooks: Sequence[TraceHook] = (),
        context: CallContext | None = None,
        hops: int = 0,
        quota: PerNode | None = None,
        subject: str | None = None,
        caller_trace: dict[str, str] | None = None,
    ) -> CallToolResult:
        """One call of a node's tool (by name, or as listed) outside any agent, bounded and
        traced like an agent's, for the caller `context` describes (its `meta` goes on, with
        the hop count set). `subject` is who asked (the authenticated MCP client of a proxied
        call), on every trace event; `caller_trace` the trace context it sent, for the call's
        span to continue.

        Raises `UnknownTool`, `DepthExceeded` when `hops` already reaches the depth limit, and
        the node's own errors (`toolkits.ToolkitError`).
        """
        self.check_hops(hops)
        if isinstance(tool, str):
            tools = await self.list_tools()
            found = tools.get(tool)
            if found is None:
                known = ", ".join(sorted(tools))
                raise UnknownTool(f"no tool named {tool!r} (available: {known})")
            tool = found
        tracer = Tracer(new_id(), (*self.hooks, *hooks), subject=subject, caller_trace=caller_trace)
        call = await self.call_node(
            tool,
            arguments,
            tracer,
            None,
            quota or self.client_quota(),
            meta={**(context.meta if context and context.meta else {}), HOPS_META_KEY: hops + 1},
            caller=context,
            info=context.info if context and context.info else CallInfo(subject=subject),
        )
        return call.result

    async def call_node(
        self,
        tool: Tool,
        arguments: Mapping[str, Any],
        tracer: Tracer,
        parent_id: str | None,
        quota: PerNode,
        *,
        meta: Mapping[str, Any],
        caller: CallContext | None = None,
        agent: RunContext | None = None,
        call_id: str | None = None,
        item: int = 0,
        info: CallInfo | None = None,
    ) -> NodeCall:
        """The one way a node's tool is called: bounded by the limits, traced (its progress
        and its server's log messages noted, after the `caller`'s own handlers had them), its
        result read for the model. For an `agent`'s call, the agent's model answers the
        server's sampling requests (`ModelAnswers`: as many as the node allows, their usage
        the call's). `info` (else the `caller`'s) tells a local tool who and what the call is
        for. The node's errors propagate."""
        node = self.nodes[tool.source_node]
        cap = node.max_output if isinstance(node, HasOutputCap) else DEFAULT_MAX_CHARS
        caller = caller or CallContext()
        limit = self._node_limits.of(node.name)
        slot = self._leases.slot_for(limit, meta, quota)  # lent by a caller, or the client's

        async def say_waiting(waits: str | None) -> None:
            said = "waiting" if waits is not None else "ended"
            await tracer.note("tool", tool.name, parent_id, slot=said, waits=waits, call=call_id)

        async with (
            taken(slot, say_waiting, caller.on_progress),
            tracer.span(
                "tool",
                tool.name,
                parent_id=parent_id,
                input=dict(arguments),
                call_id=call_id,
                node=node.name,
            ) as span,
        ):

            async def progress(done: float, total: float | None, message: str | None) -> None:
                if caller.on_progress is not None:
                    await caller.on_progress(done, total, message)
                report = ToolProgress(progress=done, total=total, message=message)
                await tracer.progress(tool.name, span.id, report)

            async def server_log(params: LoggingMessageNotificationParams) -> None:
                if caller.on_log is not None:
                    await caller.on_log(params)
                await tracer.server_log(tool.name, span.id, params)

            answer, owner, answerable = caller.answer, caller.owner, caller.answerable
            complete = caller.on_elicitation_complete  # for the caller that answers
            yield_after = caller.yield_after
            answers = None
            if answer is None and agent is not None and agent.model is not None:
                # The agent's model answers sampling (calls of one run may answer for each
                # other), the run's approver a served agent's approval question, and the
                # client attending the run (if any) the other elicitations.
                remote = RemoteApprovals(agent, call_id=call_id, item=item, span_id=span.id)
                model = TracedModel(agent.model, tracer, span.id, agent.budget, hops=agent.depth)

                async def warn(said: str) -> None:
                    await tracer.note("tool", tool.name, span.id, warning=said)

                answers = ModelAnswers(
                    model,
                    approvals=remote.answer,
                    questions=agent.questions,
                    server=f"MCP server {node.name!r}",
                    max_sampling=node.max_sampling
                    if isinstance(node, HasSamplingCap)
                    else DEFAULT_MAX_SAMPLING,
                    budget=agent.budget,
                    on_warning=warn,
                )
                answer, owner, answerable = answers.handle, tracer, answers.answerable
                complete = yield_after = None
            with (
                tracer.calling_from(span.id) as carrier,  # the server's spans continue it
                self._leases.lending(limit, tool, meta) as meta,
            ):
                context = CallContext(
                    on_progress=progress,
                    meta={**meta, **carrier} if carrier else meta,
                    on_log=server_log,
                    answer=answer,
                    owner=owner,
                    answerable=answerable,
                    on_elicitation_complete=complete,
                    yield_after=yield_after,
                    info=info or caller.info,
                )
                try:
                    result = await node.call_tool(tool.name, arguments, context=context)
                finally:
                    if answers is not None:
                        answers.close()
            if answers is not None:
                # A server need not wait for its answers: those still being made are the
                # call's usage too (and its budget's), counted once they end.
                await answers.settled()
            # Read, printed, stored and sent to models from here on (else its error).
            server = node.name if isinstance(node, McpToolkit) else None
            result = readable_result(result, server, tool.name)
            usage = answers.usage if answers is not None else Usage()
            reported = reported_usage(result)
            if reported is not None:  # an agent served by another gateway: its run's usage
                if answers is not None and answers.usage.requests:
                    # Its requests to this side's model (sampling) are counted here already.
                    requests = max(0, reported.requests - answers.usage.requests)
                    reported = reported.model_copy(update={"requests": requests})
                usage += reported
                if agent is not None:
                    agent.budget.charge(reported)
            media = tuple(
                MediaPart(type=m.kind, media_type=m.mime_type, data=m.data)
                for m in result_media(result)
            )
            if result.is_error:
                why = observed_text(result, cap) or "the tool reported an error"
                span.fail(why, private=True)
                return NodeCall(result, error=span.error, usage=usage, media=media)
            if reported is not None:
                span.output = answer_data(result, cap)  # the answer, not the usage
            else:
                span.output = result_data(result, max_chars=cap)
            return NodeCall(result, data=span.output, usage=usage, media=media)

    async def tools_of(
        self, node_names: Sequence[str], owner: str, *, remedy: str = "give one a prefix"
    ) -> dict[str, Tool]:
        """The tools of the named nodes (an agent's name: that agent, as a tool), by the name
        the model sees, every node listed at once (`catalog`), without those that came around
        a loop of gateways or as many gateways deep as the depth limit (`loops`).

        Raises `ConfigError` for a name that is neither a node nor an agent, `ToolConflict`
        (naming `owner` and the `remedy`) for a tool name two nodes offer. While the nodes list
        the same tools, every call returns the same dict: read it, do not change it.
        """
        missing = [n for n in node_names if n not in self.nodes and n not in self.agents]
        if missing:
            raise ConfigError(f"{owner} uses nodes that are not configured: {missing}")
        listings = self._listings_at_hand(node_names)
        if listings is None:  # a node must be waited on (its first connection, say)
            nodes = [
                self.nodes[name] if name in self.nodes else AgentNode(self.agents[name])
                for name in node_names
            ]
            listings = [listed for _, listed in await list_each(nodes, lambda n: n.list_tools())]
        key = tuple(node_names)
        kept = self._listed.get(key)
        if (  # a tuple cannot have changed since
            kept is not None
            and same_objects(kept[0], listings)
            and all(type(listed) is tuple for listed in listings)
        ):
            return kept[1]  # 1,000 tools claimed again cost a warm tools/list ~0.3 ms
        tools: dict[str, Tool] = {}
        for listed in listings:
            for tool in self._loops.kept(listed, self.max_depth):  # gateways in a loop
                claim(
                    tools,
                    tool.name,
                    tool,
                    node_of=_node_of,
                    what="tool",
                    refuse=remedy,
                    scope=owner,
                )
        self._listed[key] = (listings, tools)
        return tools

    def _listings_at_hand(self, node_names: Sequence[str]) -> list[Sequence[Tool]] | None:
        """Every named node's tools as they are now, or None if one would have to be waited
        on. A warm listing so takes no task per node (50 tasks: ~1 ms, most of a warm
        tools/list of 50 nodes)."""
        listings: list[Sequence[Tool]] = []
        for name in node_names:
            node = self._at_hand.get(name)
            if node is not None and node is self.nodes.get(name):  # not replaced since
                listed = node.tools_at_hand()
            else:
                listed = self._agent_listing(name)
            if listed is None:
                return None
            listings.append(listed)
        return listings

    def _agent_listing(self, name: str) -> tuple[Tool] | None:
        """Agent `name`'s one tool, the same tuple while the agent is the same (None for a
        name that is no agent: a node without `tools_at_hand`)."""
        spec = self.agents.get(name)
        if spec is None or name in self.nodes:
            return None
        kept = self._agent_listings.get(name)
        if kept is None or kept[0] is not spec:
            kept = self._agent_listings[name] = (spec, (agent_as_tool(spec),))
        return kept[1]

    def check_hops(self, hops: int) -> None:
        """Raises `DepthExceeded` for a request that arrives `hops` deep, at the limit."""
        if hops >= self.max_depth:
            # The count is not of gateways alone: a calling gateway's agents count too.
            raise DepthExceeded(
                f"refused: the request arrives {hops} levels deep, the depth limit "
                f"({self.max_depth}, max_depth), counting each agent on the calling gateways "
                "that led here and each gateway that relayed it (gateways calling each other "
                "in a loop end here)"
            )

    def _agent(self, name: str) -> AgentSpec:
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(sorted(self.agents)) or "none"
            raise UnknownAgent(f"no agent named {name!r} (configured: {known})") from None


@dataclass(frozen=True, slots=True)
class NodeCall:
    """One node call's outcome, as the model reads it."""

    result: CallToolResult
    data: JsonValue = None
    """What the model reads of a result that is not an error."""
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    """What answering the server's sampling requests cost, and the run of an agent served by
    another gateway (as it reported)."""
    media: tuple[MediaPart, ...] = ()
    """The result's images and audio, for a model that reads them (described in the text too)."""


def _node_of(tool: Tool) -> str:
    return tool.source_node
