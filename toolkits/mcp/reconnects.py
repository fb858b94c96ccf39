"""When a node tries its server again after losing it, and what it says about it meanwhile.

The session's owner task (`session.OwnedSession`) tells `Reconnects` how each attempt and each
session ended, and waits as long as it is told: not at all after a session that lived a while,
with exponential backoff after failed attempts and sessions that died young (`Backoff`).

A call that finds the node waiting out that backoff may start the next attempt itself
(`call_may_try`), and waits for it: a server that comes back (a deploy, a restart) is followed
within a call, not within the backoff's 30 s, while a node nobody calls keeps its backoff. One
attempt runs at a time, a call waits for one attempt at most, and the next early one waits
`Backoff.early` after an attempt ends, so a storm of calls to a server that is down costs an
attempt a second. Only servers the node does not start: a stdio server that crashed is started
again at once (its session lived), and one that fails to start would cost a process a second.

Logged: the first failed attempt of an outage, a new reason and, every `_REPEAT_WARNING` s, the
same one at WARNING, the attempts between at INFO (a dead server left in a config would fill a
log with thousands of lines a day); a lost session at WARNING; and the reconnection at WARNING
once a WARNING said the server was failing, so a log read at the default level does not end on
the failure.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta

import anyio

from ..health import NodeHealth
from .backoff import Backoff

__all__ = ["Reconnects"]

_REPEAT_WARNING = 600.0
"""How often a server that goes on failing for the same reason is warned of again (s)."""


class Reconnects:
    """One node's attempts to connect: how long to wait, when a call may try early, what to say."""

    def __init__(self, backoff: Backoff, log: logging.Logger, *, early: bool) -> None:
        self._backoff = backoff
        self._log = log
        self._early = early
        self._failures = 0  # failed connection attempts in a row
        self._flaps = 0  # sessions in a row that died before `stable_after`
        self._warned: tuple[tuple[str, bool] | None, float] = (None, -math.inf)
        """Why the last loud failure was, and when (reset by a connection)."""
        self._down_since: float | None = None
        self._said_down = False  # a WARNING told of this outage
        self._connected_before = False
        self._ended = 0
        self._ended_at = -math.inf
        self._early_from = math.inf
        self._try_now = anyio.Event()

    @property
    def failing(self) -> int:
        """Failed attempts (or sessions that died young) in a row: what the health shows."""
        return max(self._failures, self._flaps)

    @property
    def ended(self) -> int:
        """Attempts and sessions ended so far: a call notes it, to wait for one attempt at most."""
        return self._ended

    def attempt_failed(
        self, reason: str, *, needs_login: bool, took: float, cause: str | None = None
    ) -> float:
        """Log a failed attempt; returns how long to wait before the next one (s). `cause`:
        what makes two attempts fail the same way (default: `reason`), without what may be
        told of one and not the next (an exit status known only once the process is reaped,
        which a loaded machine may take longer for than the attempt waits)."""
        now = self._end()
        self._failures += 1
        if self._down_since is None:
            self._down_since = now - took
        # A login made meanwhile is picked up: asking for one is said loudly once.
        same = (reason if cause is None else cause, needs_login)
        loud = same != self._warned[0] or now - self._warned[1] >= _REPEAT_WARNING
        if needs_login and self._failures > 1:
            loud = False
        if loud:
            self._warned = (same, now)
            self._said_down = True
        level = logging.WARNING if loud else logging.INFO
        self._log.log(level, "could not connect (attempt %d): %s", self._failures, reason)
        return self._backoff.delay(self._failures)

    def session_lost(self, reason: str, *, lived: float) -> float:
        """Log a session's end; returns how long to wait before the next attempt (s)."""
        self._down_since = self._end()
        self._said_down = True
        self._flaps = self._flaps + 1 if lived < self._backoff.stable_after else 0
        self._log.warning("connection lost: %s", reason)
        return self._backoff.delay(self._flaps - 1)

    def connected(self, version: str) -> None:
        """Log a connection made; an outage said at WARNING ends at WARNING too."""
        if self._said_down and self._down_since is not None:
            failed = self._failures
            attempts = f"{failed} failed attempt{'s' if failed != 1 else ''} / " if failed else ""
            self._log.warning(
                "%s (protocol %s) after %s%s",
                "reconnected" if self._connected_before else "connected",
                version,
                attempts,
                _seconds(anyio.current_time() - self._down_since),
            )
        else:
            self._log.info("connected (protocol %s)", version)
        self._failures = 0
        self._warned = (None, -math.inf)  # the next outage is said again, however soon
        self._down_since = None
        self._said_down = False
        self._connected_before = True

    async def wait(self, delay: float) -> None:
        """Wait `delay` s, or until a call starts the next attempt."""
        with anyio.move_on_after(delay):
            await self._try_now.wait()

    def call_may_try(self, seen: int) -> bool:
        """Whether a call that finds the node failing, and saw `ended == seen` when it began,
        starts the next attempt now (then it waits for the attempt's outcome)."""
        if self._ended > seen or anyio.current_time() < self._early_from:
            return False
        self._try_now.set()
        return True

    def unavailable(self, node: str, health: NodeHealth) -> str:
        """What a call that finds the node failing is told: the last error and how old it is."""
        now = anyio.current_time()
        said = f"MCP server {node!r} is unavailable: {health.last_error}"
        if self._ended_at > -math.inf:
            said += f" ({_seconds(now - self._ended_at)} ago)"
        retry_at = health.retry_at
        if self._early_from < math.inf:
            early_at = datetime.now(UTC) + timedelta(seconds=self._early_from - now)
            if retry_at is None or early_at < retry_at:
                wait = max(0.0, self._early_from - now)
                return f"{said}; a call in {_seconds(wait)} or later tries again"
        return f"{said}; next attempt at {retry_at:%H:%M:%S}Z" if retry_at else said

    def _end(self) -> float:
        """Note an attempt or a session ended now; returns now."""
        now = anyio.current_time()
        self._ended += 1
        self._ended_at = now
        if self._early:
            self._early_from = now + self._backoff.early
        self._try_now = anyio.Event()  # before the node says it failed: a call may set it
        return now


def _seconds(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
