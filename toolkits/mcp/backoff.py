"""How long a node waits before it reconnects to a server that went away."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_BACKOFF", "Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """How long a node waits before reconnecting."""

    initial: float = 0.5
    maximum: float = 30.0
    stable_after: float = 10.0
    """A session that lived this long before dying is reconnected at once; one that died
    sooner counts towards the backoff, so a server that crashes on every start is not
    restarted in a hot loop."""
    early: float = 1.0
    """A call that finds a server it does not start (HTTP) down tries it again itself once
    this long has passed since the last attempt ended: a server that is back is followed
    within a call, not after the backoff's wait, and an idle node keeps the backoff."""

    def delay(self, failures: int) -> float:
        return 0.0 if failures <= 0 else min(self.maximum, self.initial * 2 ** (failures - 1))


DEFAULT_BACKOFF = Backoff()
