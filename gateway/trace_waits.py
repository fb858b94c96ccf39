"""How long a span waited rather than worked: the time a call under it waited for a person's
approval or for a slot of its node.

The waits are the trace's own notes: `approval: waiting` until `approved`, `denied` or
`refused` (`step_loop`, `remote_approvals`), `slot: waiting` until `ended` (`Gateway.call_node`),
each under the span the call belongs to. A wait counts for that span and every span around it
(a sub-agent's wait is its tool call's, its agent's and the run's), once however many waits
overlap; a span that ends while a wait is open (the run stopped to wait: `--no-wait`, an
input-required round) ends the wait with it. A call that ran beside a waiting one does not
make that time busy: the step goes on only once every call of it has ended.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from pydantic import JsonValue

__all__ = ["Waits"]

_ENDS = {"approval": ("approved", "denied", "refused"), "slot": ("ended",)}
"""What each kind of wait's note says when the wait is over."""


class Waits:
    """The open spans of one tracer, and how long each waited so far."""

    __slots__ = ("_open", "_parents", "_since", "_waited", "_waiting")

    def __init__(self) -> None:
        self._parents: dict[str, str | None] = {}
        self._open: dict[str, int] = {}
        """Per open span: the waits open under it."""
        self._since: dict[str, float] = {}
        """Per open span with a wait open under it: since when one has been."""
        self._waited: dict[str, float] = {}
        """Per open span: the seconds it waited, but for the wait open now."""
        self._waiting: dict[tuple[str, str | None, str], str] = {}
        """The open waits (what for, the call, its tool) and the span each was noted under."""

    def opened(self, span_id: str, parent_id: str | None) -> None:
        self._parents[span_id] = parent_id

    def noted(self, name: str, parent_id: str | None, said: Mapping[str, JsonValue]) -> None:
        """A note under `parent_id`: a wait begins or ends if it says so."""
        for kind, ends in _ENDS.items():
            word, call = said.get(kind), said.get("call")
            if word is None or parent_id is None or not isinstance(call, str | None):
                continue
            key = (kind, call, name)
            if word == "waiting" and key not in self._waiting and parent_id in self._parents:
                self._waiting[key] = parent_id
                self._add(parent_id, 1, time.perf_counter())
            elif word in ends and self._waiting.get(key) == parent_id:
                del self._waiting[key]
                self._add(parent_id, -1, time.perf_counter())

    def closed(self, span_id: str) -> float | None:
        """The span ended: the seconds it waited (None: it never did). Its waits still open
        end with it."""
        now = time.perf_counter()
        for key in [k for k, under in self._waiting.items() if under == span_id]:
            del self._waiting[key]
            self._add(span_id, -1, now)
        self._parents.pop(span_id, None)
        self._open.pop(span_id, None)
        self._since.pop(span_id, None)
        return self._waited.pop(span_id, None)

    def _add(self, span_id: str, change: int, now: float) -> None:
        """`change` waits open under `span_id` and the spans around it."""
        at: str | None = span_id
        while at is not None and at in self._parents:
            count = self._open.get(at, 0) + change
            self._open[at] = count
            if count == 1 and change > 0:
                self._since[at] = now
            elif count == 0:
                began = self._since.pop(at, now)
                self._waited[at] = self._waited.get(at, 0.0) + now - began
            at = self._parents[at]
