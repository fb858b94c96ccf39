"""The calls a server is answering now, so that a server told to stop can refuse new ones
(`refuse_new`), wait for those in flight (`wait_ended`), and answer those still running at the
end of its grace with an error result that says so (`end_all`).

Nothing else would end them in time: a call's own work (a model request, a local tool) runs
in its request's task, which only the HTTP server's own timeout cancels, and a cancelled
request gets no answer at all (a 2025-era client reads "SSE stream ended without a
response", a 2026-07-28 one an error with no text). A call on an MCP node would end when its
node stops, but the nodes stop only once the HTTP server has.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Self, TypeVar

import anyio
import mcp_types as types

from toolkits import error_result

__all__ = ["AGAIN", "RunningCalls", "note_if_ended", "stopped_result"]

_R = TypeVar("_R")

_notes: ContextVar[list[str] | None] = ContextVar("agent_gateway_cut_off_notes", default=None)


AGAIN = "Call again once the gateway is back."
"""What a client whose call was ended can do, unless the call noted otherwise."""


def stopped_result(name: str, why: str) -> types.CallToolResult:
    """The answer to a call of `name` that the server ended, saying `why`."""
    return error_result(f"the call to {name!r} was stopped: {why}")


def note_if_ended(text: str) -> None:
    """Say `text` instead of `AGAIN` if the server ends the calling request (what its client
    can still do: a stored run goes on). Outside `RunningCalls.answer`, nothing."""
    notes = _notes.get()
    if notes is not None:
        notes.append(text)


class RunningCalls:
    """The calls in flight, each in a cancel scope that `end_all` cancels."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self._why: str | None = None
        self.refusing: str | None = None
        """Why new calls are refused (`refuse_new`, else `end_all`); None while they are
        taken."""
        self._in_flight = 0
        self._ended: anyio.Event | None = None
        """Set once no call is in flight, while `wait_ended` waits for that."""

    @property
    def in_flight(self) -> int:
        """The calls being answered now (those answered elsewhere and `counted` too)."""
        return self._in_flight

    async def answer(
        self,
        call: Callable[[], Awaitable[_R]],
        ended: Callable[[str], _R],
        *,
        refusable: bool = True,
    ) -> _R:
        """`await call()`; once `end_all(why)` ended it, `ended(text)`: `why`, then the call's
        notes (`note_if_ended`) or `AGAIN`. A call that begins after `refuse_new(why)` is
        `ended` at once saying that `why` (`end_all`'s if nothing refused before), unless not
        `refusable` (a request that waits on a call made before: `end_all`'s `why`)."""
        if self.refusing is not None and refusable:
            # Also after `end_all`: a call that begins then never ran, so was not cut off.
            return ended(f"{self.refusing} {AGAIN}")
        if self._why is not None:
            return ended(f"{self._why} {AGAIN}")
        notes: list[str] = []
        token = _notes.set(notes)
        try:
            with self.counted(), anyio.CancelScope() as scope:
                self._scopes.add(scope)
                try:
                    return await call()
                finally:
                    self._scopes.discard(scope)
        finally:
            _notes.reset(token)
        # Reached only when `end_all` cancelled the call.
        return ended(" ".join([self._why or "", *(notes or [AGAIN])]))

    def counted(self) -> Self:
        """Count a call in flight while the `with` block runs (one answered elsewhere: a call
        passed through, which `end_all` does not end). Itself: the hot path makes no object
        per call (`contextmanager` would make two)."""
        return self

    def __enter__(self) -> None:
        self._in_flight += 1

    def __exit__(self, *_: object) -> None:
        self._in_flight -= 1
        if not self._in_flight and self._ended is not None:
            self._ended.set()
            self._ended = None

    def hold(self, scope: anyio.CancelScope) -> None:
        """Let `end_all` end the call running in `scope` too (one passed through, counted with
        `counted`), which answers with `ended` once its scope caught that."""
        self._scopes.add(scope)

    def release(self, scope: anyio.CancelScope) -> None:
        """The call `hold` was told of has ended."""
        self._scopes.discard(scope)

    @property
    def ended(self) -> str | None:
        """Why `end_all` ended the calls, and what their clients can do; None before."""
        return None if self._why is None else f"{self._why} {AGAIN}"

    def refuse_new(self, why: str) -> None:
        """The server is stopping: the calls that begin from now on are answered at once,
        saying `why`; those in flight go on."""
        self.refusing = why

    async def wait_ended(self) -> None:
        """Return once no call is in flight."""
        while self._in_flight:
            if self._ended is None:
                self._ended = anyio.Event()
            await self._ended.wait()

    def end_all(self, why: str) -> None:
        """The server is stopping: end every call in flight, and every call that begins from
        now on, saying `why`."""
        self._why = why
        if self.refusing is None:
            self.refusing = why
        for scope in list(self._scopes):
            scope.cancel()
