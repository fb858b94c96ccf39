"""How long one MCP request may take: its clock.

A request may go `timeout` seconds without a sign of life (a progress notification restarts
the clock) and never past its absolute `cap`. While the server waits on our answer to one of
its own requests, only the cap applies: the server is waiting on us, not hung.
"""

from __future__ import annotations

import asyncio
import math

import anyio

from ..errors import ToolTimeout

__all__ = ["Deadline", "timed_out"]


class Deadline:
    """One request's clock; run the request inside `scope`, which it cancels when time is up.

    `scope`, if given, is the caller's, entered around more than the request (a cancel scope
    costs a call through a gateway more than the rest of its clock): the clock runs on it
    until `stop`, and `expired` tells its cancellation from the caller's own.
    """

    def __init__(self, timeout: float, cap: float, scope: anyio.CancelScope | None = None) -> None:
        self.timeout = timeout
        self.cap = cap
        # `anyio.current_time()` on asyncio, without asking which library runs: a request
        # through a gateway makes one `Deadline`, and the asking cost it ~80 bytecodes.
        try:
            now = asyncio.get_running_loop().time()
        except RuntimeError:  # no asyncio loop: another library's (trio)
            now = anyio.current_time()
        self._hard = now + cap
        self._waiting = False
        if scope is None:
            self.scope = anyio.CancelScope(deadline=min(now + timeout, self._hard))
        else:
            self.scope = scope
            scope.deadline = min(now + timeout, self._hard)

    def alive(self) -> None:
        """A sign of life: another `timeout`, within the cap (not while waiting on us)."""
        if not self._waiting:
            self.scope.deadline = self._restarted()

    def waiting(self, now_waiting: bool) -> None:
        """The server starts (True) or stops (False) waiting on our answer."""
        self._waiting = now_waiting
        self.scope.deadline = self._hard if now_waiting else self._restarted()

    @property
    def expired(self) -> bool:
        """Whether the clock ran out (the scope may also have been cancelled by its owner)."""
        return anyio.current_time() >= self.scope.deadline

    def stop(self) -> None:
        """The request is over: the clock stops (for a scope that outlives it)."""
        self.scope.deadline = math.inf

    @property
    def capped(self) -> bool:
        """Whether the absolute cap, not the idle timeout, ended the request."""
        return anyio.current_time() >= self._hard

    def _restarted(self) -> float:
        return min(anyio.current_time() + self.timeout, self._hard)


def timed_out(deadline: Deadline, tool: str, node: str) -> ToolTimeout:
    """The error for a call to `tool` of MCP server `node` that `deadline` ended."""
    if deadline.capped:
        seconds, why = deadline.cap, f"no result within {deadline.cap:g} s, the absolute limit"
    else:
        seconds, why = deadline.timeout, f"no result or progress for {deadline.timeout:g} s"
    return ToolTimeout(
        f"tool {tool!r} of MCP server {node!r} timed out ({why}); the call was cancelled",
        node=node,
        tool=tool,
        seconds=seconds,
    )
