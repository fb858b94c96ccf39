"""Human approval of tool calls: which calls need it, and who is asked.

A call needs approval when a rule covers its tool: its agent's (`require_approval` globs over
the tool names the model sees) or its MCP server's (globs over the server's own names, or all
of its tools), or either rule's `require_approval_if_destructive` and the server marks the
tool `destructiveHint`. The run asks its `Approver` and waits for the decision while the other
calls of the same step go on. Approved, the call runs; denied, the model is told so, with the
person's message, and goes on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue

__all__ = [
    "CANCELLED",
    "DECLINED",
    "NOBODY_TO_ASK",
    "NOT_ASKED",
    "ApprovalRequest",
    "ApprovalRule",
    "Approver",
    "AsksAtOnce",
    "Decision",
    "rejection",
    "short_call",
]

NOBODY_TO_ASK = (
    "this tool call needs a person's approval, and this run cannot wait for one: run it with "
    "a run store (not --no-store), or from an MCP client that can be asked"
)


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    tools: Sequence[str] = ()
    """Globs over tool names (fnmatch, case-sensitive): `fs__write_*`, `*` for every tool."""
    destructive: bool = False
    """Also every tool its server marks `destructiveHint`."""

    def covers(self, name: str, annotations: Mapping[str, Any]) -> bool:
        if any(fnmatchcase(name, pattern) for pattern in self.tools):
            return True
        return self.destructive and annotations.get("destructiveHint") is True


class ApprovalRequest(BaseModel):
    """One call waiting for a person's decision."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call: str
    """The call's name in its run: `tool 0 c1`, `h1/tool 0 c2` (the agent run as tool call
    `h1` made it). `runs approve RUN CALL` names it so."""
    tool: str
    input: dict[str, JsonValue]
    agents: list[str]
    """The agents from the run's own down to the one that made the call."""
    item: int

    @property
    def short(self) -> str:
        """The call's name without its item: the tool call ids down to it (`h1/c2`)."""
        return short_call(self.call)


def short_call(call: str) -> str:
    """A call's name (`ApprovalRequest.call`) without its item: `h1/c2` for `h1/tool 0 c2`."""
    path, _, own = call.rpartition("/")
    return f"{path}/{own.split(' ')[-1]}" if path else own.split(" ")[-1]


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


class Approver(Protocol):
    async def decide(self, request: ApprovalRequest) -> Decision:
        """Ask for a decision on `request` and wait for it. Raises only what stops the whole
        run (its cancellation, or a `RunPaused`)."""
        ...


@runtime_checkable
class AsksAtOnce(Protocol):
    """An approver that is shown a step's requests before any call of the step runs."""

    async def ask_at_once(self, requests: Sequence[ApprovalRequest]) -> None:
        """Raise `RunPaused` to ask them in one round outside this run (the step runs again,
        from the run's last checkpoint, once they are answered); return to decide each call
        as it comes."""
        ...


def rejection(request: ApprovalRequest, decision: Decision) -> str:
    """What the model is told of a denied call."""
    said = f" The user said: {decision.message}" if decision.message else ""
    if decision.refused_as:
        return f"The tool call to {request.tool} did not run: {decision.refused_as}.{said}"
    return f"The user rejected the tool call to {request.tool}; it did not run.{said}"
