"""A stored run's recorded calls as a tree: its model answers and tool calls in the order
they began (those the agent answered itself among them: `answered_calls`), each agent run
as a tool holding its own calls.

The records' names say where each call belongs (`journal.ScopedJournal`): a call made by an
agent that runs as the tool call `c1` of its caller is named `c1/...`, so it goes under the
record of the tool call `c1`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, cast

from pydantic import JsonValue

from agent import ROUTING_KEY
from agent.models import thinking_text

from ..journal import call_key
from ..run_state import RunState
from .status import RunStep

__all__ = ["CallNode", "call_tree", "recorded_call"]


@dataclass(slots=True, eq=False)
class CallNode:
    kind: Literal["model", "tool"]
    name: str
    """The tool's name; for a model call, "model"."""
    call_id: str | None = None
    """The tool call's id (tool calls)."""
    item: int | None = None
    """Which of the run's items it served (tool calls)."""
    started_ms: int | None = None
    took_ms: int | None = None
    """From its start to its end; an agent's, from its first call's start."""
    input: JsonValue = None
    """What the tool was called with."""
    output: JsonValue = None
    """A model's answer (`content`, `tool_calls`, `thinking` if it returned any as text), a
    tool's result."""
    error: str | None = None
    usage: dict[str, JsonValue] | None = None
    approval: dict[str, JsonValue] | None = None
    """A person's decision on the call (`approved`, `message`), if it needed one."""
    calls: list[CallNode] = field(default_factory=list["CallNode"])
    """The calls of the agent this tool call ran."""
    in_flight: bool = False
    """Asked for and not recorded yet: under way (or not begun) when the run stopped."""
    waiting_approval: bool = False
    """In flight, waiting for a person's decision (or it was when the run was cancelled)."""
    cancelled: bool = False
    """In flight when the run was cancelled: it ended there."""

    def to_json(self) -> dict[str, JsonValue]:
        shown: dict[str, JsonValue] = {
            "kind": self.kind,
            "name": self.name,
            "call_id": self.call_id,
            "item": self.item,
            "started_ms": self.started_ms,
            "took_ms": self.took_ms,
            "input": self.input,
            "output": self.output,
            "error": self.error,
            "usage": self.usage,
            "approval": self.approval,
        }
        if self.calls:
            shown["calls"] = [call.to_json() for call in self.calls]
        for flag in ("in_flight", "waiting_approval", "cancelled"):
            if getattr(self, flag):
                shown[flag] = True
        return shown


def call_tree(
    steps: Sequence[RunStep],
    *,
    state: RunState | None = None,
    in_flight: bool = False,
    cancelled: bool = False,
    asked: Collection[str] = (),
    decisions: Mapping[str, dict[str, JsonValue]] | None = None,
) -> list[CallNode]:
    """The run's own calls, each agent tool's calls under it. With `in_flight` (a run that
    has not ended) or `cancelled`, also the tool calls of each agent's last step that have no
    record (as its saved `state` asks them, each of its item; without a state, as its last
    model call did): they were under way when it stopped or was cancelled, had not begun, or
    waited for a person's approval (`asked`: by their names, `1:h1/tool 0 c2`). `decisions`:
    those sent to the run (by call name), besides those it took (its records)."""
    top: list[CallNode] = []
    agents: dict[str, CallNode] = {}
    """Tool calls by the path their agent's calls are named under (`c1/`, `c1/c7/`)."""

    def calls_under(path: str) -> list[CallNode]:
        if not path:
            return top
        parent = agents.get(path)
        if parent is None:  # not recorded yet: in flight when its process died, or resumed
            above, _, key = path.removesuffix("/").rpartition("/")
            item, _, call_id = key.rpartition(":")
            parent = agents[path] = CallNode(
                kind="tool",
                name="(unknown)",
                call_id=call_id,
                item=int(item) if item.isdigit() else 0,
                in_flight=True,
            )
            calls_under(f"{above}/" if above else "").append(parent)
        return parent.calls

    decisions = {**(decisions or {}), **_decisions(steps)}
    for step in sorted(steps, key=lambda s: s.step_id):
        path, _, own = step.name.rpartition("/")
        path = f"{path}/" if path else ""
        node = _node(own, step)
        if node is None:
            continue
        if node.kind == "tool" and node.call_id is not None:
            node.approval = _verdict(decisions.get(step.name))
            under = f"{path}{call_key(node.item or 0, node.call_id)}/"
            known = agents.get(under)
            if known is not None:  # its agent's calls were recorded before it
                node.calls = known.calls
                siblings = calls_under(path)
                siblings[siblings.index(known)] = node
                agents[under] = node
                continue
            agents[under] = node
        calls_under(path).append(node)
    for path in sorted(agents, key=lambda p: -p.count("/")):  # the deepest agents first
        _time_from_first_call(agents[path])
    if in_flight or cancelled:
        _add_in_flight(top, "", state, _Unfinished(set(asked), decisions, cancelled))
    return top


@dataclass(frozen=True, slots=True)
class _Unfinished:
    """What marks the calls in flight: which waited for approval, the decisions sent on them
    (by call name), and whether the run was cancelled."""

    asked: set[str]
    decisions: Mapping[str, dict[str, JsonValue]]
    cancelled: bool

    def mark(self, call: CallNode, name: str) -> None:
        call.cancelled = self.cancelled
        if name in self.asked:
            call.approval = _verdict(self.decisions.get(name))
            call.waiting_approval = call.approval is None


@dataclass(frozen=True, slots=True)
class _Ask:
    """A tool call an agent's last step asked for."""

    item: int | None
    """Its item (None: unknown, read from a model's answer)."""
    call_id: str | None
    name: str
    input: Any


def _add_in_flight(
    calls: list[CallNode], path: str, state: RunState | None, unfinished: _Unfinished
) -> None:
    """The tool calls of the last step of the agent whose calls are `calls` (made under
    `path`: `1:h1/`) that were not recorded (an agent's that began: its calls were), named as
    the model asked; the same below (`state`: that agent's saved state, if known)."""
    for call in calls:
        if call.calls and call.call_id is not None:
            key = call_key(call.item or 0, call.call_id)
            below = state.children.get(key) if state is not None else None
            _add_in_flight(call.calls, f"{path}{key}/", below, unfinished)
    tools: dict[tuple[int | None, str | None], CallNode]
    if state is not None:
        asks = _asked_in(state)
        tools = {(c.item, c.call_id): c for c in calls if c.kind == "tool"}
    else:
        asks, after = _asked_last(calls)
        tools = {(None, c.call_id): c for c in after}
    for ask in asks:
        found = tools.get((ask.item, ask.call_id))
        if found is None:
            found = CallNode(
                kind="tool",
                name=ask.name,
                call_id=ask.call_id,
                item=ask.item,
                input=ask.input,
                in_flight=True,
            )
            calls.append(found)
        elif found.in_flight:  # an agent under way: its own calls were recorded
            found.name, found.input = ask.name, ask.input
        if found.in_flight:
            unfinished.mark(found, f"{path}tool {ask.item or 0} {ask.call_id}")


def _asked_in(state: RunState) -> list[_Ask]:
    """The calls of an agent's pending request: every item's, each named by its item (two
    items' models may give the same ids), and only those it dispatched (not those it
    answered itself: an unknown tool, bad arguments)."""
    actions = state.request.actions if state.request is not None else []
    return [
        _Ask(
            item=action.item_index,
            call_id=action.tool_call_id,
            name=action.tool,
            input=_as_the_model_wrote(action.model_dump(mode="json"), action.tool),
        )
        for action in actions
    ]


def _asked_last(calls: list[CallNode]) -> tuple[list[_Ask], list[CallNode]]:
    """The calls the last model call of `calls` asked for, and the tool calls recorded after
    it: for a run whose saved state is not at hand."""
    models = [index for index, call in enumerate(calls) if call.kind == "model"]
    if not models or not isinstance(answer := calls[models[-1]].output, dict):
        return [], []
    asked = answer.get("tool_calls")
    asks = [
        _Ask(
            item=None,
            call_id=call_id if isinstance(call_id := ask.get("id"), str) else None,
            name=str(ask.get("name")),
            input=ask.get("arguments"),
        )
        for ask in cast(list[dict[str, Any]], asked if isinstance(asked, list) else [])
    ]
    return asks, [c for c in calls[models[-1] + 1 :] if c.kind == "tool"]


def _verdict(decision: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
    """A decision as a call shows it: without who sent it to whom (`call`, `id`)."""
    if decision is None:
        return None
    return {k: v for k, v in decision.items() if k not in ("call", "id")}


def recorded_call(step: RunStep) -> CallNode | None:
    """One recorded model or tool call on its own (None: a record of something else)."""
    return _node(step.name.rpartition("/")[2], step)


def _decisions(steps: Sequence[RunStep]) -> dict[str, dict[str, JsonValue]]:
    """The decisions the run received on its calls that needed approval, by call name."""
    found: dict[str, dict[str, JsonValue]] = {}
    for step in steps:
        message: Any = step.output
        if step.name == "DBOS.recv" and isinstance(message, dict):
            data = cast(dict[str, JsonValue], message)
            call = data.get("call")
            if isinstance(call, str):
                found.setdefault(call, data)
    return found


def _time_from_first_call(node: CallNode) -> None:
    """An agent's tool call is recorded when it ends: it began when its first call did (one
    under way, not recorded yet, too)."""
    starts = [call.started_ms for call in node.calls if call.started_ms is not None]
    if starts and node.in_flight:
        node.started_ms = min(starts)
    if not starts or node.started_ms is None or node.took_ms is None:
        return
    ended = node.started_ms + node.took_ms
    node.started_ms = min(starts)
    node.took_ms = ended - node.started_ms


def _node(own: str, step: RunStep) -> CallNode | None:
    took = (
        step.completed_ms - step.started_ms
        if step.completed_ms is not None and step.started_ms is not None
        else None
    )
    output: Any = step.output
    if own.startswith("model "):
        node = CallNode(kind="model", name="model", started_ms=step.started_ms, took_ms=took)
        if isinstance(output, dict):
            answer = cast(dict[str, Any], output)
            node.output = {
                "content": answer.get("content"),
                "tool_calls": [
                    {"id": c.get("id"), "name": c.get("name"), "arguments": _as_written(c)}
                    for c in cast(list[dict[str, Any]], answer.get("tool_calls") or [])
                ],
            }
            thinking = thinking_text(answer.get("raw"), str(answer.get("content") or ""))
            if thinking:
                node.output["thinking"] = thinking
            node.usage = answer.get("usage")
        node.error = step.error
        return node
    if own.startswith("tool "):
        _, item, call_id = own.split(" ", 2)
        node = CallNode(
            kind="tool",
            name="(unknown)",
            call_id=call_id,
            item=int(item) if item.isdigit() else None,
            started_ms=step.started_ms,
            took_ms=took,
            error=step.error,
        )
        if isinstance(output, dict):
            response = cast(dict[str, Any], output)
            action = cast(dict[str, Any], response.get("action") or {})
            node.name = str(action.get("tool", "(unknown)"))
            node.input = _as_the_model_wrote(action, node.name)
            node.output = response.get("data")
            node.error = response.get("error") or step.error
            usage = cast(dict[str, JsonValue], response.get("usage") or {})
            node.usage = usage if any(usage.values()) else None  # agents' tools spend tokens
        return node
    return None


def _as_written(call: dict[str, Any]) -> Any:
    """A model's call's arguments, or their text when they were not a JSON object."""
    text = call.get("invalid_arguments")
    return text if isinstance(text, str) else call.get("arguments")


def _as_the_model_wrote(action: dict[str, Any], tool: str) -> Any:
    """A call's input without the routing key a toolkit node's calls carry (`ROUTING_KEY`),
    or with the model's own argument of that name there (`Action.displaced`)."""
    given = action.get("input")
    if not isinstance(given, dict):
        return given
    arguments = cast(dict[str, Any], given)
    if arguments.get(ROUTING_KEY) != tool:
        return arguments
    displaced = action.get("displaced")
    if isinstance(displaced, dict):
        return {**arguments, **cast(dict[str, Any], displaced)}
    return {key: value for key, value in arguments.items() if key != ROUTING_KEY}
