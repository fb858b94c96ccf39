"""The persisted run model: what a run is, stored between steps, and what it returns.

A `RunState` holds everything needed to continue a run in any process; a `Checkpoint` gets
each new state; `RunSaver` keeps the latest one while the run goes on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from agent import (
    Action,
    ActionResponse,
    AgentItem,
    AgentResult,
    EngineRequest,
    EngineResponse,
    ItemResult,
    Usage,
)
from agent.models import spec_without_credentials
from agent.resume_check import check_request, check_response
from agent.scratchpad import tool_usage

from .errors import UnreadableRun
from .journal import ScopedJournal, call_key

__all__ = [
    "RUN_STATE_VERSION",
    "Checkpoint",
    "RunOrigin",
    "RunResult",
    "RunSaver",
    "RunState",
    "answered_by",
    "handed_on",
    "not_offered",
    "spent",
    "spent_in",
    "stored_result",
    "stored_state",
    "validation_problem",
]

RUN_STATE_VERSION = 1


class RunOrigin(BaseModel):
    """How a stored run was started, so it resumes the same way (the engine ignores it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    config: str | None = None
    """The config file's absolute path; None: the built-in default."""
    config_sha256: str | None = None
    """The file's content hash when the run started: a changed config is not resumed blindly."""
    model: str | None = None
    """The model spec that replaced every agent's (`--model`), if any, with its URL's
    credentials as `***`: a stored run holds no secret, `resume` asks for them again."""
    system: str | None = None
    """The run's agent's system message, if the run replaced it (`--system`)."""
    temperature: float | None = None
    """Every agent's temperature, if the run set it (`--temperature`)."""
    max_tokens: int | None = None
    """Every agent's answer length, if the run set it (`--max-tokens`)."""

    @field_validator("model")
    @classmethod
    def _no_credentials(cls, model: str | None) -> str | None:
        # Here, not where a run is stored: every way an origin is made (run, serve, resume)
        # and every copy of it (state, workflow input, events) then holds no password.
        return None if model is None else spec_without_credentials(model)


class RunState(BaseModel):
    """Everything needed to continue a run: the items and the agent's pending exchange.

    `request` is set when the agent's actions are still to run, `response` when they ran and
    the agent is to resume; neither is set before the first step. `result` is set once the run
    has finished: resumed, it returns that, and no call is made again.
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
    """Agents running as tools of the pending `request`, by `journal.call_key` (the tool-call
    id): their own states, so a run stopped while they worked resumes them where they were."""
    finished: dict[str, Usage] = Field(default_factory=dict[str, Usage])
    """What the calls of the pending `request` that ended (recorded in the journal) spent, by
    `journal.call_key`, where they spent any (agents run as tools, a server's sampling): a run
    stopped before the step's other calls ended counts them too. Written only when set (as
    `task`)."""
    answered: dict[str, ActionResponse] = Field(default_factory=dict[str, ActionResponse])
    """The calls of the pending `request` that ended, with what they returned, by
    `journal.call_key`, for a run that no journal records (no run store: a 2026-07-28
    client's rounds carry its state): resumed from this state, it runs none of them again.
    Written only when set (as `task`)."""
    origin: RunOrigin | None = None
    """How the run was started (config, model), for resuming it."""
    caller_trace: dict[str, str] | None = None
    """The W3C trace context the MCP client sent with its call (`traceparent`, ...), else, of
    a stored run that no caller's trace reached, that of its top span, a trace's root (saved
    as it opens: `RunSaver.rooted`): the run's spans continue it, also when resumed later."""
    task: bool = False
    """Started as an MCP task (a `tools/call` with `task`): the client's `tasks/*` see it.
    Written only when set: a state without it is one an earlier version (a replica not yet
    upgraded) reads."""
    result: AgentResult | None = None
    """The run's outcome, once it finished (every item's answer or error, what it spent):
    the last state a checkpoint gets. Written only when set (as `task`)."""
    handed_on: dict[int, str] = Field(default_factory=dict[int, str])
    """Per item handed off to an agent that handed it on in turn (triage -> billing ->
    refunds), the agent that answered, the chain's last: what the item's `handoff` names
    (`answered_by`). Written only when set (as `task`)."""

    @model_validator(mode="after")
    def _resumable(self) -> RunState:
        # A request or response that does not fit the items (a damaged or edited record: an
        # action of an item the run has not, an item both finished and waiting) is refused
        # when the state is read, before any of its calls runs again (`resume_check`).
        if self.request is not None:
            check_request(self.items, self.request)
        if self.response is not None:
            check_response(self.items, self.response)
        return self

    @model_serializer(mode="wrap")
    def _newer_fields_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if not self.task:
            data.pop("task", None)
        if not self.finished:
            data.pop("finished", None)
        if not self.answered:
            data.pop("answered", None)
        if not self.handed_on:
            data.pop("handed_on", None)
        if self.result is None:
            data.pop("result", None)
        return data


def handed_on(state: RunState, item: int, answered_by: str | None) -> dict[int, str]:
    """`state.handed_on` once item `item`'s handoff answered: by `answered_by`, the agent its
    specialist handed on to (None: the specialist answered itself)."""
    handed = {index: name for index, name in state.handed_on.items() if index != item}
    return handed if answered_by is None else {**handed, item: answered_by}


def answered_by(result: AgentResult, state: RunState) -> AgentResult:
    """`result` with each handed-off item's `handoff` naming the agent that answered, the
    last of a chain of handoffs (`state.handed_on`), not the first hop: whose answer
    `output` is."""
    if not state.handed_on:
        return result
    items = [
        item.model_copy(update={"handoff": state.handed_on.get(index, item.handoff)})
        if item.handoff is not None
        else item
        for index, item in enumerate(result.items)
    ]
    return result.model_copy(update={"items": items})


def spent(state: RunState) -> Usage:
    """What the run's model calls had cost by its last checkpoint: its agent's, the agents'
    it ran as tools that finished, and those of the agents still working as its tools (their
    own states, in `children`; those that ended beside them, `finished`), so a run stopped
    inside a sub-agent counts its calls too; a finished run, what its result says."""
    if state.result is not None:
        return state.result.usage
    exchange = state.response or state.request
    used = exchange.metadata.usage if exchange is not None else Usage()
    used += tool_usage(state.response)
    for child in state.children.values():
        used += spent(child)
    for ended in state.finished.values():
        used += ended
    return used


def spent_in(state: RunState, action: Action) -> Usage:
    """What `action` had spent (an agent run as a tool, a server's sampling; nothing: not
    begun, or nothing to spend)."""
    key = call_key(action.item_index, action.tool_call_id)
    child = state.children.get(key)
    return spent(child) if child is not None else state.finished.get(key, Usage())


def not_offered(action: Action, state: RunState) -> ActionResponse:
    """`action`'s answer in a stored run resumed on a gateway that does not offer its tool:
    the model is told why, and what the call had spent (an agent it was inside) stays
    counted."""
    child = state.children.get(call_key(action.item_index, action.tool_call_id))
    why = (
        f"tool {action.tool!r} is not offered by node {action.node!r}"
        if child is None
        else f"agent {child.agent!r}, which this call ran when the run stopped, is not in "
        "this gateway now: the call did not finish"
    )
    return ActionResponse(action=action, error=why, usage=spent_in(state, action))


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


def stored_state(text: str | bytes, run_id: str) -> RunState:
    """The `RunState` a store holds for `run_id`. Raises `UnreadableRun` for one that does not
    validate, in one line (the first problem: a pydantic dump repeats the record)."""
    try:
        return RunState.model_validate_json(text)
    except ValidationError as exc:
        raise UnreadableRun(
            f"stored run {run_id!r} cannot be resumed: {validation_problem(exc)}"
        ) from None


def stored_result(text: str | bytes, run_id: str) -> RunResult:
    """The `RunResult` a store holds for `run_id`. Raises `UnreadableRun` (one line) for one
    that does not validate (one nested deeper than its reader goes, say)."""
    try:
        return RunResult.model_validate_json(text)
    except ValidationError as exc:
        raise UnreadableRun(
            f"the result of stored run {run_id!r} cannot be read: {validation_problem(exc)}"
        ) from None


def validation_problem(exc: ValidationError) -> str:
    """The first problem of a record that does not validate, where it is, in one line."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    said = error["msg"].removeprefix("Value error, ")
    if len(where) > 200:  # a path hundreds of levels deep (`...list.0.list.0...`)
        where = f"{where[:100]}...{where[-40:]}"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {said}{more}" if where else f"{said}{more}"


Checkpoint = Callable[[RunState], Awaitable[None]]


class RunSaver:
    """A run's latest state, handed to its checkpoint on every change. Agents running as its
    tools save their own states into it (`children`), so the outer checkpoint holds them."""

    def __init__(
        self, state: RunState, checkpoint: Checkpoint | None, journal: ScopedJournal | None = None
    ) -> None:
        self.state = state
        self._checkpoint = checkpoint
        self.journal = journal
        self._writing = anyio.Lock()
        self._written: RunState | None = None

    async def save(self, **update: Any) -> None:
        self.update(**update)
        if self._checkpoint is None:
            return
        # One write at a time, of the state as it is then: calls that run side by side (the
        # step's tools) save side by side, and a store may finish their writes in another
        # order (DBOS writes in threads), which would leave an older state as the last.
        async with self._writing:
            latest = self.state
            if latest is not self._written:  # else a save that came later wrote this change
                await self._checkpoint(latest)
                self._written = latest

    async def rooted(self, trace: dict[str, str] | None) -> None:
        """The run's top span opened as the root of the trace `trace` (`Tracer.root_context`):
        a run whose state is kept (stored) and that continues no caller's trace saves it at
        once (`caller_trace`), so that each process resuming it from any later stop continues
        under that span."""
        if trace is not None and self._checkpoint is not None and self.state.caller_trace is None:
            await self.save(caller_trace=trace)

    def update(self, **update: Any) -> None:
        """Change the state without a checkpoint (the next one holds the change)."""
        self.state = self.state.model_copy(update=update)

    async def ended(self, call_id: str, response: ActionResponse) -> None:
        """The pending request's call `call_id` ended with `response`: the state counts what
        it spent (`finished`), no longer what it had saved as it went (`children`); without a
        journal to record it, it keeps the response too (`answered`)."""
        if self._checkpoint is None:
            return  # nothing stored
        usage = response.usage
        children = {key: child for key, child in self.state.children.items() if key != call_id}
        finished = self.state.finished
        if usage != Usage() or call_id in self.state.children:
            finished = {**finished, call_id: usage}
        if self.journal is None:
            await self.save(
                children=children,
                finished=finished,
                answered={**self.state.answered, call_id: response},
            )
            return
        if finished is self.state.finished or self.state.finished.get(call_id) == usage:
            # Nothing to count (no state write for a plain tool), or a resumed run's recorded
            # call, counted before it stopped.
            return
        await self.save(children=children, finished=finished)

    def child(self, call_id: str) -> Checkpoint | None:
        if self._checkpoint is None:  # nobody stores this run: its children need not save
            return None

        async def save_child(child: RunState) -> None:
            await self.save(children={**self.state.children, call_id: child})

        return save_child
