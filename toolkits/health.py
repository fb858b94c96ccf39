"""How a node's connection is doing, as a value a status page or a log line can show.

stopped ──run()──► connecting ──► ready ──(server died)──► reconnecting ──► ready
                       │                                       │
                       └────────────► failed ◄─────────────────┘
          (waits out the backoff, then tries again; a call may try it sooner)
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

__all__ = ["HealthState", "NodeHealth"]

HealthState = Literal["stopped", "connecting", "ready", "reconnecting", "failed"]


@dataclass(frozen=True, slots=True)
class NodeHealth:
    """A snapshot of one node's connection."""

    node: str
    state: HealthState
    since: datetime
    """When the node entered `state` (UTC)."""
    tool_count: int
    """Tools the node offers now (the last known list while reconnecting)."""
    last_error: str | None = None
    """Why the last connection failed or ended; kept after a later success, for the record."""
    failures: int = 0
    """Connection attempts that failed in a row (kept while the next one is made)."""
    retry_at: datetime | None = None
    """When the next attempt starts, while `failed`."""
    protocol_version: str | None = None
    """The protocol version of the live connection, while `ready`."""

    @property
    def retrying(self) -> bool:
        """Making another attempt after failed ones."""
        return self.state in ("connecting", "reconnecting") and self.failures > 0

    @property
    def shown_state(self) -> HealthState:
        """The state as a person reads it: a node trying again after failed attempts is
        `failed` still, whether it is read during the backoff or during the attempt."""
        return "failed" if self.retrying else self.state

    def __str__(self) -> str:
        state, retrying = self.shown_state, self.retrying
        parts = [
            f"{self.node}: {state} since {self.since:%Y-%m-%d %H:%M:%S}Z",
            f"{self.tool_count} tool{'s' if self.tool_count != 1 else ''}",
        ]
        if self.protocol_version is not None:
            parts.append(f"protocol {self.protocol_version}")
        if state == "failed":
            parts.append(f"{self.failures} failed attempt{'s' if self.failures != 1 else ''}")
            if retrying:
                parts.append("trying again now")
            elif self.retry_at is not None:
                parts.append(f"next try at {self.retry_at:%H:%M:%S}Z")
        line = ", ".join(parts)
        if self.last_error is not None and self.state != "ready":
            line += f": {self.last_error}"
        return line
