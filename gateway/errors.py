"""Exceptions raised by the gateway package.

    GatewayError
    ├── ConfigError          the configuration is invalid (the message names the key)
    ├── UnknownAgent         no agent of that name is configured
    ├── UnknownTool          no tool of that name is offered
    ├── ToolConflict         two nodes offer a tool under the same name to one agent
    ├── DepthExceeded        a request nested deeper than the depth limit (gateway loops)
    ├── UnknownRun           no stored run has that id (or its state cannot be read)
    │   └── UnreadableRun    its stored state or result does not validate (another version's,
    │                        a damaged or edited record): one line, the first problem
    ├── AlreadyDecided       a call waiting for approval had a decision already (the first stands)
    ├── RunCancelled         the stored run was cancelled (`runs cancel`) while it ran
    └── StoreError           the run store's URL is not one, or the store cannot be used
        ├── StoreUnavailable the run store's database cannot be reached, or written now
        │   └── StoreGone    its SQLite file was deleted under the runs executing here
        └── PickledRecord    a stored record is in Python's pickle format: refused, unread
            └── PickledDecision  a decision an older version sent to a run, so refused

Model failures keep their own type (`agent.ModelError`) and toolkit failures theirs
(`toolkits.ToolkitError`); a failing tool never fails a run, it becomes an observation, and
so does a node's call that raised anything else (a bug: logged with its traceback) but what
`stops_the_run`. A call cut off because its node is being stopped (`toolkits.NodeStopped`: the gateway is going
away) had no outcome: it ends the run instead (a stored run is left to resume, or to another
replica).

A failure that stopped a sub-agent's run says which (`say_stopped_in`, `stopped_in`): a
note for people, the chain of agents for scripts.

Not failures: control-flow signals that stop a run for now, to resume it later.

    RunPaused                the run waits for an answer from outside (e.g. the client's model)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from agent.errors import AgentError, StepPaused
from toolkits.errors import NodeStopped

__all__ = [
    "AlreadyDecided",
    "ConfigError",
    "DepthExceeded",
    "GatewayError",
    "PickledDecision",
    "PickledRecord",
    "RunCancelled",
    "RunPaused",
    "StoreError",
    "StoreGone",
    "StoreUnavailable",
    "ToolConflict",
    "UnknownAgent",
    "UnknownRun",
    "UnknownTool",
    "UnreadableRun",
    "leaves_of",
    "say_stopped_in",
    "stopped_in",
    "stops_the_run",
]


class RunPaused(Exception):  # a control-flow signal, not an error
    """The run waits for an answer from outside and resumes from its last checkpoint once
    it has it; the trace marks the spans it ends as `paused` with `reason`."""

    def __init__(self, message: str, *, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


class GatewayError(Exception):
    """Base of every error the gateway package raises."""


class ConfigError(GatewayError):
    """The configuration is invalid."""


class UnknownAgent(GatewayError):
    """No agent of that name is configured."""


class UnknownTool(GatewayError):
    """No tool of that name is offered."""


class ToolConflict(GatewayError):
    """Two nodes offer a tool under the same name to one agent."""


class DepthExceeded(GatewayError):
    """A request arrived nested deeper than the depth limit (e.g. gateways calling each other)."""


class UnknownRun(GatewayError):
    """No stored run has that id (or its state cannot be read)."""


class UnreadableRun(UnknownRun):
    """A stored run whose state or result does not validate: one written by another version,
    a damaged or edited record. What else is stored of it (its status, its steps) reads."""


class AlreadyDecided(GatewayError):
    """A decision on a call waiting for approval came after another one: the first stands."""


class RunCancelled(GatewayError):
    """The stored run was cancelled (`runs cancel`, from any process) while it ran here."""


class StoreError(GatewayError):
    """The run store's URL is not one, or the store cannot be used (not a database)."""


class StoreUnavailable(StoreError):
    """The run store's database cannot be reached (refused, unknown host, ...), or cannot be
    written now (a SQLite file locked by another process, its disk full, read-only)."""


class StoreGone(StoreUnavailable):
    """The run store's SQLite file was deleted (or replaced) while runs executed here: what
    they recorded went with it, and they cannot be resumed."""


class PickledRecord(StoreError):
    """A record of the run store is in Python's pickle format (written by an older version,
    or by anyone who can write the store): it is refused unread, as reading it could run any
    code (`[store] read_pickled` opts in)."""


class PickledDecision(PickledRecord):
    """A decision on a run's call (approve, deny) sent by an older version, in Python's
    pickle format: the run's calls are neither decided nor resumed until it is read (as the
    run would take it first)."""


_STOPPED_IN = "agent_gateway_stopped_in"
_SAID = "stopped in the sub-agent "


def say_stopped_in(failure: BaseException, chain: Sequence[str]) -> None:
    """Mark `failure` as what stopped the run of the sub-agent at the end of `chain` (the
    agents from the run's own down to it): a note for people, `stopped_in` for scripts. The
    deepest one is said, once."""
    if stopped_in(failure) is None:
        failure.add_note(f"{_SAID}{chain[-1]!r} ({' -> '.join(chain)})")
        setattr(failure, _STOPPED_IN, list(chain))


def stopped_in(failure: BaseException) -> list[str] | None:
    """The agents from the run's own down to the sub-agent whose run `failure` stopped; None
    if it stopped no sub-agent's run."""
    chain: list[str] | None = getattr(failure, _STOPPED_IN, None)
    return list(chain) if chain is not None else None


def stops_the_run(failure: BaseException) -> bool:
    """Whether `failure`, out of a node's call, stops the run rather than the call: a signal
    (`RunPaused`, `StepPaused`, `NodeStopped`), the gateway's own errors (the store, a
    cancelled run) and the agent's (its model answering the server's sampling). Anything else
    is a bug in the node, or on its result's way, and fails the call alone."""
    if isinstance(failure, BaseExceptionGroup):
        group = cast("BaseExceptionGroup[BaseException]", failure)
        return any(stops_the_run(inner) for inner in group.exceptions)
    return isinstance(failure, RunPaused | StepPaused | NodeStopped | GatewayError | AgentError)


def leaves_of(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    """The exceptions in `group` and in the groups inside it, in order."""
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            leaves += leaves_of(cast("BaseExceptionGroup[BaseException]", exc))
        else:
            leaves.append(exc)
    return leaves
