"""The order one step's model calls take their answers in, for a model that answers by order
(`ScriptedModel`: one answer per call, down its list).

A step calls the model for every item of its batch at once, so which call reaches the model
first depends on what each one waits for on its way there (its session's history, a stored
run's record, a trace's hooks). A model whose answer depends on that order awaits
`take_turn` first: it returns once every earlier item of the step has made its call, or will
make none, so the calls of a step are answered in item order. Other models never ask, and
their calls go at once.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import anyio

__all__ = ["StepCalls", "take_turn"]


class StepCalls:
    """One step's model calls, one per item of its batch, in item order."""

    def __init__(self, items: Sequence[int]) -> None:
        self._done = {index: anyio.Event() for index in sorted(items)}

    @contextmanager
    def calling(self, index: int) -> Generator[None]:
        """Around item `index`'s model call: the model it reaches can take its turn."""
        token = _turn.set((self, index))
        try:
            yield
        finally:
            _turn.reset(token)

    @contextmanager
    def item(self, index: int) -> Generator[None]:
        """Around item `index`'s part of the step: once it ends, the item made its call or
        will make none (it failed before, or its answer was read from a stored run's record),
        and later items wait no longer for it."""
        try:
            yield
        finally:
            self._done[index].set()

    async def wait_turn(self, index: int) -> None:
        """Until every item before `index` made its call; then `index` has made its own."""
        for earlier, done in self._done.items():
            if earlier >= index:
                break
            await done.wait()
        self._done[index].set()


_turn: ContextVar[tuple[StepCalls, int] | None] = ContextVar("agent_call_turn", default=None)


async def take_turn() -> None:
    """Wait until every earlier item of this call's step has made its model call; at once for
    a call made outside a step of several items (a summary, a step of one item)."""
    current = _turn.get()
    if current is not None:
        calls, index = current
        await calls.wait_turn(index)
