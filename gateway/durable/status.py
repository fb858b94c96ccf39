"""What a stored run looks like from outside: its status, its recorded steps, store errors.

A run's status is DBOS's, refined by the `execution` event its workflow keeps (where it runs,
and why it stopped if it did):

    running           its process is at work (or died on another machine: resume it there)
    waiting_approval  calls of it wait for a person: `runs approve|deny` (if its process is
                      gone, `runs resume` after)
    stopped           it failed (a model down), was interrupted, or its process on this
                      machine died, or every call it waited on was decided while no process
                      ran it: `runs resume` continues it
    succeeded         it finished (items that failed on their own are in its result)
    failed            every item of it failed on its own (max iterations, ...), or DBOS
                      could not run it at all
    cancelled         `runs cancel`
"""

from __future__ import annotations

import os
import socket
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from pydantic import JsonValue

from ..approval import ApprovalRequest
from ..run_state import RunState
from .chunks import MARK

__all__ = [
    "ACTIVE_STATUSES",
    "CHECKPOINT_STEP",
    "EXECUTION_EVENT",
    "LEFT_WAITING",
    "RESULT_EVENT",
    "STATE_EVENT",
    "STATUSES",
    "RunInfo",
    "RunStep",
    "asked_in",
    "call_name",
    "journal_name",
    "run_info",
    "run_steps",
]

STATE_EVENT = "state"
CHECKPOINT_STEP = MARK + "checkpoint"
"""The name of a run's steps that hold its checkpoints (`checkpoints`): no call's record has
it, since the journal keeps names starting with `MARK` apart (`journal_name`)."""
EXECUTION_EVENT = "execution"
RESULT_EVENT = "result"
"""The result of a run whose every item failed: DBOS keeps the output of a run that succeeded
only, and the run is failed (`endings.ItemsFailed`)."""
STATUSES = ("running", "waiting_approval", "stopped", "succeeded", "failed", "cancelled")
ACTIVE_STATUSES = ("running", "waiting_approval", "stopped")
LEFT_WAITING = "left waiting by --no-wait"
"""Why a run whose process returned as soon as a call waited for a person (`--no-wait`)
stopped: nothing interrupted it."""
_FINAL = {"SUCCESS": "succeeded", "ERROR": "failed", "CANCELLED": "cancelled"}


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    status: str
    """One of `STATUSES`."""
    agent: str | None
    created_ms: int | None
    updated_ms: int | None
    """When it last changed: its status, or (going on) a call, checkpoint or decision."""
    error: str | None
    """Why it stopped or failed."""
    host: str | None = None
    pid: int | None = None
    """Where it last ran."""
    waiting: list[ApprovalRequest] = field(default_factory=list[ApprovalRequest])
    """Its calls waiting for a person's approval."""
    decided: list[ApprovalRequest] = field(default_factory=list[ApprovalRequest])
    """Its calls that waited and are decided, the decision not taken yet: no process runs
    it (`runs resume` takes it), or its process is about to."""
    orphaned: bool = False
    """Its process on this machine ended before it did (killed, restarted): no failure of
    its own stopped it."""

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "run_id": self.run_id,
            "status": self.status,
            "agent": self.agent,
            "created_ms": self.created_ms,
            "updated_ms": self.updated_ms,
            "error": self.error,
            "host": self.host,
            "pid": self.pid,
            "waiting": [{**r.model_dump(mode="json"), "short": r.short} for r in self.waiting],
        }


@dataclass(frozen=True, slots=True)
class RunStep:
    step_id: int
    name: str
    output: Any
    error: str | None
    started_ms: int | None
    completed_ms: int | None


def run_steps(recorded: Iterable[Any]) -> list[RunStep]:
    """DBOS's step records (`list_workflow_steps`) of the run's own calls and decisions."""
    return [
        RunStep(
            step_id=s["function_id"],
            name=call_name(s["function_name"]),
            output=s["output"],
            error=str(s["error"]) if s["error"] is not None else None,
            started_ms=s["started_at_epoch_ms"],
            completed_ms=s["completed_at_epoch_ms"],
        )
        for s in recorded
        if (not s["function_name"].startswith("DBOS.") or s["function_name"] == "DBOS.recv")
        and s["function_name"] != CHECKPOINT_STEP
    ]


def journal_name(call: str) -> str:
    """The name a call's record has: its own, with one more `MARK` in front if it starts
    with one (a model's odd tool-call id), so none is ever a name of ours (`CHECKPOINT_STEP`)."""
    return MARK + call if call.startswith(MARK) else call


def call_name(recorded: str) -> str:
    """The call a record's name (`journal_name`) names."""
    return recorded[1:] if recorded.startswith(MARK) else recorded


def run_info(
    status: Any,
    execution: Any,
    waiting: Any = None,
    decided: Collection[str] = (),
    *,
    changed_ms: int | None = None,
) -> RunInfo:
    """A DBOS workflow status, the run's `execution` and `approvals` events, the calls a
    decision was sent on (`decided`) and when its records last changed (`changed_ms`, which
    DBOS's status does not move: `changes`), as a `RunInfo`."""
    agent: str | None = None
    inputs = getattr(status, "input", None)
    if inputs is not None:
        try:
            agent = RunState.model_validate_json(inputs["args"][0]).agent
        except Exception:  # a run of another version: its agent is unknown, the rest shows
            agent = None
    error = getattr(status, "error", None)
    ours = _FINAL.get(status.status, "running")
    where: dict[str, Any] = (
        cast(dict[str, Any], execution) if ours == "running" and isinstance(execution, dict) else {}
    )
    host, pid, stopped = where.get("host"), where.get("pid"), where.get("stopped")
    orphaned = (
        bool(where)
        and stopped is None
        and host == socket.gethostname()
        and not _alive(pid, where.get("since"))
    )
    if orphaned:
        stopped = f"its process ({pid}) ended before the run did"
    if stopped is not None:
        ours = "stopped"
    asked = asked_in(waiting) if _FINAL.get(status.status) is None else []
    # The event lists a call until the run takes its decision: one sent while no process
    # ran the run waits for `runs resume`, and nobody is waited on any more.
    waits = [r for r in asked if r.call not in decided]
    done = [r for r in asked if r.call in decided]
    if waits:
        ours = "waiting_approval"  # whether its process lives or not: it needs a person first
    elif done and stopped is not None:
        stopped = f"decided {', '.join(sorted(r.short for r in done))}: resume to continue"
    return RunInfo(
        run_id=status.workflow_id,
        status=ours,
        agent=agent,
        created_ms=status.created_at,
        updated_ms=max(
            (at for at in (status.updated_at, changed_ms) if at is not None), default=None
        ),
        error=str(stopped) if stopped is not None else str(error) if error is not None else None,
        host=host if isinstance(host, str) else None,
        pid=pid if isinstance(pid, int) else None,
        waiting=waits,
        decided=done,
        orphaned=orphaned,
    )


def asked_in(approvals: Any) -> list[ApprovalRequest]:
    """The calls a run's `approvals` event lists: waiting for a decision, or decided and not
    taken yet; when it stopped or was cancelled, those it waited on then."""
    if not isinstance(approvals, dict):
        return []
    return [ApprovalRequest.model_validate(r) for r in cast(dict[str, Any], approvals).values()]


def this_process() -> dict[str, Any]:
    """Where a run executes, as its `execution` event records it: the host, the pid, and
    (on Linux) when the process started, so that a pid reused later is not taken for it."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "since": _started(pid)}


def _alive(pid: object, since: object = None) -> bool:
    """Whether process `pid` runs (a zombie has ended: killed, its parent has not reaped it
    yet), and is the one that started at `since` when that is known."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    stat = _stat(pid)
    if stat is not None:
        state, started = stat
        return state not in ("Z", "X") and (since is None or since == started)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _started(pid: int) -> int | None:
    stat = _stat(pid)
    return stat[1] if stat is not None else None


def _stat(pid: int) -> tuple[str, int] | None:
    """Linux's state letter and start time (clock ticks since boot) of `pid`; None where
    there is no /proc, or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            text = file.read().decode(errors="replace")
    except OSError:
        return None
    # `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so split after
    # the last ')'; the start time is field 22 of the line, the 20th after comm.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[19])
    except (IndexError, ValueError):
        return None
