"""What a served agent's caller is told when its run ends without an answer, and what it can
do about it.

A run *failed* when its question got an error of its own (the model rejected the request,
max iterations, an answer cut off): the run has ended, and the same question would likely
fail the same way. A run *stopped* when something outside the question broke (the model
unreachable or failing after retries, a bad API key, chat memory down): with a run store it
is kept where it stopped (`stopped`, resumable: `agent-gateway runs resume` on the gateway's
machine continues it), and calling again may work once the cause is gone. With a store, the
words follow the run's stored status, and name the run. The store itself is never named to
the client (its URL or path is the operator's): the gateway's log says how to resume.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import mcp_types as types

from agent import (
    AgentError,
    MemoryStoreError,
    ModelAuthError,
    ModelConfigError,
    ModelError,
    StepInterrupted,
)
from toolkits import NodeStopped, ToolkitError, error_result

from ...agent_tool import usage_meta
from ...errors import GatewayError, StoreUnavailable, stopped_in
from ..running_calls import note_if_ended

if TYPE_CHECKING:
    from .stored_runs import StoredAgentRuns

__all__ = ["item_failed", "note_stored", "run_ended", "stopped", "stored_failure"]

_log = logging.getLogger(__name__)

_SAME_AGAIN = "calling again with the same prompt would likely fail the same way"


def item_failed(agent: str, error: str, run_id: str | None = None) -> str:
    """A question that failed on its own (`ItemResult.error`); `run_id`: its stored run's."""
    ended = f"Run {run_id} has ended (failed)" if run_id else "The run has ended"
    return f"agent {agent!r} failed: {_sentence(error)} {ended} and cannot be continued: {_SAME_AGAIN}."


def stopped(agent: str, exc: Exception) -> str:
    """A run without a store that raised `exc`: stopped, if calling again can help; where, if
    in a sub-agent."""
    hint = _retry_hint(exc)
    inside = stopped_in(exc)
    where = f" in the sub-agent {inside[-1]!r} ({' -> '.join(inside)})" if inside else ""
    if hint is None:
        return f"agent {agent!r} failed{where}: {exc}"
    return (
        f"agent {agent!r} stopped{where}: {_sentence(str(exc))} The run is not stored (the "
        f"gateway has no run store): {hint}."
    )


def note_stored(stored: StoredAgentRuns, run_id: str) -> None:
    """What a client whose call the server ends (it is stopping) can do about its stored run:
    a replica on a shared store hands its runs over (another finishes them); any other
    gateway leaves the run stopped, for its operator to resume (`StoredAgentRuns.follow`
    logs how)."""
    if stored.runs.replica:
        note_if_ended(
            f"Run {run_id} is stored and goes on in another gateway serving its store: "
            f'get_run {{"run_id": "{run_id}"}} gives its answer.'
        )
    else:
        note_if_ended(
            f"Run {run_id} is stored where it stopped: the gateway's operator can continue it "
            f"(agent-gateway runs resume {run_id})."
        )


async def stored_failure(
    stored: StoredAgentRuns, agent: str, run_id: str, exc: Exception
) -> types.CallToolResult:
    """A stored run that raised `exc` (to the call following it), told as the store has it;
    one the store's outage stopped, which goes on here once the store is back, without
    asking it."""
    if isinstance(exc, StoreUnavailable) and (
        run_id in stored.runs.stranded or stored.runs.here(run_id)
    ):
        # The store's URL and the driver's words on it are the operator's (the log has them).
        return error_result(
            f"agent {agent!r} stopped: the gateway's run store became unreachable. Run "
            f"{run_id} is stored where it stopped, and goes on in the gateway once the store "
            "is back: get_run gives its answer."
        )
    try:
        info = await stored.runs.get(run_id)
        spent = await stored.usage_so_far(run_id)
    except (AgentError, GatewayError, ToolkitError):  # the store cannot say: the error can
        return error_result(f"agent {agent!r} failed: {exc} (run {run_id})")
    ended = error_result(run_ended(stored, agent, run_id, info.status, str(exc)))
    # What it spent until it stopped, for a calling gateway's usage and token_budget.
    return ended.model_copy(update={"meta": usage_meta(spent)}) if spent else ended


def run_ended(
    stored: StoredAgentRuns, agent: str, run_id: str, status: str, error: str | None
) -> str:
    """A stored run that ended without an answer, or follows no more, as its `status` says."""
    why = f": {error.rstrip('.')}" if error else ""  # a sentence of ours ends it
    if status == "failed":
        return item_failed(agent, error or "its question failed", run_id)
    if status == "stopped":
        _log.warning(
            "run %s of agent %r stopped%s; to continue it: agent-gateway runs resume %s%s",
            run_id,
            agent,
            why,
            run_id,
            stored.store_option,
        )
        return (
            f"agent {agent!r} stopped{why}. Run {run_id} is stored where it stopped: the "
            f"gateway's operator can continue it (agent-gateway runs resume {run_id}); or "
            "call again (a new run) once the cause is gone."
        )
    if status == "cancelled":
        return f"agent {agent!r}: run {run_id} was cancelled"
    return f"agent {agent!r} failed{why} (run {run_id} is {status}: get_run shows it)"


def _sentence(text: str) -> str:
    """`text` as a sentence of its own: ended with a full stop, unless it ends itself."""
    return text if text.endswith((".", "!", "?")) else f"{text}."


def _retry_hint(exc: Exception) -> str | None:
    """What calling again can do after `exc` stopped a run; None: it is no passing trouble."""
    cause = exc.error if isinstance(exc, StepInterrupted) else exc
    if isinstance(cause, ModelAuthError | ModelConfigError):
        return (
            "calling again fails the same way until the gateway's operator mends the model's "
            "configuration (its API key or model spec)"
        )
    if isinstance(cause, ModelError | MemoryStoreError | NodeStopped):
        return "calling again starts it over, and may work once the cause is gone"
    return None
