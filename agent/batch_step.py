"""One step of a batch's items, each advanced at once.

Each item's part of the step (its model call, and what came of it) runs beside the others'; a
model answering by order (a script) answers them in item order (`StepCalls`). What an item's
part raises is never a failure of the agent's (those are its outcome), but a signal, such as a
pause for the client's answer: it is kept beside the other items' outcomes, which run to their
end, so the step keeps their progress and the signals can go out together. An item alone in
its step runs by itself, and its signal goes through as itself.

Items of a batch on one session take turns (`in_turn`): the later one starts once the earlier
one's turn is saved, so it reads that turn, as a session's turns do across runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar, cast

import anyio

from .call_order import StepCalls
from .protocol import AgentItem

__all__ = ["advance_together", "in_turn"]

T = TypeVar("T")


async def advance_together(
    batch: Sequence[int], advance: Callable[[int, StepCalls | None], Awaitable[T]]
) -> tuple[dict[int, T], dict[int, Exception]]:
    """`advance(index, order)` for every item of `batch`: their outcomes, and the signals
    raised instead (both by item)."""
    outcomes: dict[int, T] = {}
    signals: dict[int, Exception] = {}
    if len(batch) == 1:
        outcomes[batch[0]] = await advance(batch[0], None)
        return outcomes, signals
    order = StepCalls(batch)

    async def one(index: int) -> None:
        with order.item(index):
            try:
                outcomes[index] = await advance(index, order)
            except Exception as signal:
                signals[index] = signal

    try:
        async with anyio.create_task_group() as tg:
            for index in batch:
                tg.start_soon(one, index)
    except BaseExceptionGroup as group:  # what no `except Exception` takes (an exit)
        raise _first_leaf(group) from None
    return outcomes, signals


def in_turn(batch: Sequence[int], items: Sequence[AgentItem]) -> list[int]:
    """The items of `batch` (unfinished, in order) that may advance now: each but one whose
    `session_id` an earlier one of the batch has (it waits for that one to finish)."""
    sessions: set[str] = set()
    now: list[int] = []
    for index in batch:
        session = items[index].session_id
        if session is None or session not in sessions:
            now.append(index)
        if session is not None:
            sessions.add(session)
    return now


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    if isinstance(first, BaseExceptionGroup):
        return _first_leaf(cast(BaseExceptionGroup[BaseException], first))
    return first
