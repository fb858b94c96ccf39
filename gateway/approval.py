"""Human approval of tool calls: which calls need it, and who is asked.

A call needs approval when a rule covers its tool: its agent's or its MCP server's
`require_approval` (globs, or all of a server's tools), or either rule's
`require_approval_if_destructive` and the server marks the tool `destructiveHint`. A glob
covers a tool if it matches any of its names (`approval_names`): the one the model sees now,
the server's own, and `SERVER__TOOL`. With `prefix="auto"` or `"never"` the name the model
sees depends on which servers are up, so a rule written for one of those names must not stop
applying when another server comes or goes. The run asks its `Approver` and waits for the decision while the other
calls of the same step go on. Approved, the call runs, and the model is told the person's
message after its result (`approval_note`); denied, the model is told so, with the person's
message, and goes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue

from toolkits import Tool
from toolkits.mcp.naming import rule_names

from .errors import RunPaused
from .journal import call_key
from .trace import Tracer

__all__ = [
    "CANCELLED",
    "DECLINED",
    "NOBODY_TO_ASK",
    "NOT_ASKED",
    "NOT_STORED",
    "NO_APPROVER",
    "NO_APPROVER_GIVEN",
    "WAITS_FOR_APPROVAL",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "AsksAtOnce",
    "Decision",
    "ExpectsSteps",
    "NobodyToAsk",
    "OpenQuestions",
    "WaitLeft",
    "agent_rule_of",
    "approval_names",
    "approval_note",
    "ask_in_one_round",
    "node_rule_of",
    "rejection",
    "short_call",
]

NOBODY_TO_ASK = (
    "this tool call needs a person's approval, and this run cannot wait for one: run it with "
    "a run store (not --no-store), or from an MCP client that can be asked"
)
"""What a run the commands or a server started, with no run store and nobody to ask, tells
its model (`NOT_STORED`)."""
NO_APPROVER_GIVEN = (
    "this tool call needs a person's approval, and this run has nobody to ask: the program "
    "that runs it gives it no approver (Gateway.run(..., approver=...))"
)
"""What a run its program gave no `Approver` tells its model (`NO_APPROVER`): in Python the
remedy is an approver, there are no commands' flags."""


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    tools: Sequence[str] = ()
    """Globs over tool names (fnmatch, case-sensitive): `fs__write_*`, `*` for every tool."""
    destructive: bool = False
    """Also every tool its server marks `destructiveHint`."""

    def covers(self, names: str | Sequence[str], annotations: Mapping[str, Any]) -> bool:
        """Whether a glob matches one of a tool's `names` (`approval_names`), or the rule
        takes destructive tools and its `annotations` say it is one."""
        return self.covering(names, annotations) is not None

    def covering(self, names: str | Sequence[str], annotations: Mapping[str, Any]) -> str | None:
        """What of this rule covers a tool (`covers`), to name it: the first glob matching one
        of its `names` (`'delete_*'`), or `destructiveHint`; None: nothing."""
        names = (names,) if isinstance(names, str) else names
        for pattern in self.tools:
            if any(fnmatchcase(name, pattern) for name in names):
                return repr(pattern)
        if self.destructive and annotations.get("destructiveHint") is True:
            return "destructiveHint"
        return None


def node_rule_of(rule: ApprovalRule | None, tool: Tool) -> str | None:
    """What of `rule`, a node's, makes a person approve each call of `tool`, named for a
    message: `require_approval 'delete_*' of server 'crm'`; None if it does not cover it."""
    return _rule_named(rule, tool, f"server {tool.source_node!r}")


def agent_rule_of(rule: ApprovalRule, agent: str, tool: Tool) -> str | None:
    """What of `rule`, `agent`'s own, makes a person approve its calls of `tool`, named:
    `require_approval 'fs__write_*' of agent 'ops'`; None if it does not cover it."""
    return _rule_named(rule, tool, f"agent {agent!r}")


def _rule_named(rule: ApprovalRule | None, tool: Tool, owner: str) -> str | None:
    covering = rule.covering(approval_names(tool), tool.annotations) if rule else None
    if covering is None:
        return None
    if covering == "destructiveHint":
        return f"require_approval_if_destructive of {owner}"
    return f"require_approval {covering} of {owner}"


def approval_names(tool: Tool) -> tuple[str, ...]:
    """Every name a rule's glob may use for `tool`: the one offered now, and for a node's tool
    that has a name of its own (an MCP server's), that name and `NODE__NAME` (`rule_names`).
    Matching all of them is the safe direction: a rule never stops covering a tool because
    another server came up or went away and the tool was renamed."""
    if tool.original_name is None:
        return (tool.name,)
    return tuple(dict.fromkeys((tool.name, *rule_names(tool.source_node, tool.original_name))))


class ApprovalRequest(BaseModel):
    """One call waiting for a person's decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call: str
    """The call's name in its run: `tool 0 c1`, `h1/tool 0 c2` (the agent run as tool call
    `h1` made it), `1:h1/tool 0 c2` (item 1's call `h1` did: `journal.call_key`). `runs
    approve RUN CALL` names it so."""
    tool: str
    input: dict[str, JsonValue]
    agents: list[str]
    """The agents from the run's own down to the one that made the call."""
    item: int
    """The run's item it works for (also when an agent run as a tool made it)."""

    @property
    def short(self) -> str:
        """The call's name as the tool call ids down to it (`h1/c2`, `1:h1/c2`)."""
        return short_call(self.call)


def short_call(call: str) -> str:
    """A call's name (`ApprovalRequest.call`) as the tool call keys down to it
    (`journal.call_key`): `h1/c2` for `h1/tool 0 c2`, `1:c2` for `tool 1 c2`, so two items'
    calls with the same ids have two short names too."""
    path, _, own = call.rpartition("/")
    _, item, call_id = own.split(" ", 2) if own.count(" ") >= 2 else ("", "0", own)
    key = call_key(int(item), call_id) if item.isdigit() else call_id
    return f"{path}/{key}" if path else key


DECLINED = "the user declined"
CANCELLED = "the approval was cancelled"
NOT_ASKED = "the approval could not be asked"
"""What refused a call that no person rejected (`Decision.refused_as`): the approval form
declined or cancelled, or not shown (`NOT_ASKED: why`)."""


class Decision(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    approved: bool
    message: str | None = None
    """What the person said, for the model (a denial's reason, say): only their own words."""
    refused_as: str | None = None
    """For a refusal that is not a person's rejection of the call (`DECLINED`, `CANCELLED`,
    `NOT_ASKED`): what happened, told to the model in place of "The user rejected"."""


WAITS_FOR_APPROVAL = "waiting for a person's approval"
"""What a run left waiting (`WaitLeft`) waits for: its spans end paused with it."""


class WaitLeft(RunPaused):
    """The run's driver chose not to wait for a person (`--no-wait`): `call` stays listed as
    waiting, and the run stops once the other calls of its step have ended, each recorded
    (none of them runs again when it resumes)."""

    def __init__(self, call: str) -> None:
        super().__init__(f"call {call} waits for a person's approval", reason=WAITS_FOR_APPROVAL)
        self.call = call


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision:
        """Ask for a decision on `request` and wait for it. Raises only what stops the whole
        run (its cancellation, or a `RunPaused`: `WaitLeft`)."""
        ...


@dataclass(frozen=True, slots=True)
class NobodyToAsk:
    """The approver of a run nobody can be asked in (a piped `chat`): each call that needs
    approval is refused, and the model told `why`, with the remedy that fits the command
    (a run without an approver is told `NO_APPROVER_GIVEN`)."""

    why: str

    async def decide(self, request: ApprovalRequest) -> Decision:
        # Asked from elsewhere (another gateway's agent, `remote_approvals`): refused so.
        return Decision(approved=False, refused_as=f"{NOT_ASKED}: {self.why}")


NO_APPROVER = NobodyToAsk(NO_APPROVER_GIVEN)
"""What stands for the approver of a run given none (`Gateway.run` in a program of one's own)."""
NOT_STORED = NobodyToAsk(NOBODY_TO_ASK)
"""The approver of a run the commands or a server started with no run store to wait in and
nobody to ask (`run --no-store`, a served run's client that cannot be asked)."""


@runtime_checkable
class AsksAtOnce(Protocol):
    """An approver that is shown a step's requests before any call of the step runs."""

    async def ask_at_once(self, requests: Sequence[ApprovalRequest]) -> None:
        """Raise `RunPaused` to ask them in one round outside this run (the step runs again,
        from the run's last checkpoint, once they are answered); return to decide each call
        as it comes."""
        ...


async def ask_in_one_round(
    approver: AsksAtOnce, requests: Sequence[ApprovalRequest], tracer: Tracer, parent_id: str
) -> None:
    """Show `approver` a step's `requests` before any of its calls runs. A round asked (the
    run pauses till it is answered) leaves each call waiting in the trace till the run stops,
    as a person's approval the run stops waiting for does (`--no-wait`); the retry that
    answers it is the decision (`StepLoop._approval`)."""
    try:
        await approver.ask_at_once(requests)
    except RunPaused:
        for request in requests:  # the step runs only once every one of them is answered
            await tracer.note(
                "tool", request.tool, parent_id, approval="waiting", call=request.call
            )
        raise


@runtime_checkable
class ExpectsSteps(Protocol):
    """An approver told of a step's requests before any of them is decided."""

    def expect(self, requests: Iterable[ApprovalRequest]) -> None:
        """`requests` are asked next, each as its call comes (`decide`): nobody is asked about
        one before every one is listed as waiting or decided (a run stopped at its first wait,
        `--no-wait`, leaves them all listed)."""
        ...


@runtime_checkable
class OpenQuestions(Protocol):
    """An approver that keeps the questions an earlier execution of the run left open."""

    def asked_again(self, request: ApprovalRequest, under: str) -> ApprovalRequest | None:
        """The question left open under the call path `under` (`l1/`) that `request` asks
        again (the same tool, input, agents and item, under another name), taken: no other
        request gets it. An agent served by another gateway starts its run over when the
        calling run resumes, and asks its questions again under new names."""
        ...


def rejection(request: ApprovalRequest, decision: Decision) -> str:
    """What the model is told of a denied call."""
    said = f" The user said: {decision.message}" if decision.message else ""
    if decision.refused_as:
        return f"The tool call to {request.tool} did not run: {decision.refused_as}.{said}"
    return f"The user rejected the tool call to {request.tool}; it did not run.{said}"


def approval_note(decision: Decision) -> str | None:
    """What the model is told after the result of an approved call: the person's message
    (`only this once`, `use the staging DB`); None if they said nothing."""
    if not decision.approved or not decision.message:
        return None
    return f"The user approved this call and said: {decision.message}"
