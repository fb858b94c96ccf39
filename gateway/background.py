"""Work that runs beside a block of code for as long as the block runs."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["alongside"]


@asynccontextmanager
async def alongside(task: Callable[[], Coroutine[Any, Any, None]]) -> AsyncGenerator[None]:
    """Run `task` in the background while the block runs, and cancel it when the block ends.

    What the block raises arrives as itself, not wrapped in an exception group: the task only
    keeps something alive (a clock, a heartbeat) and is never what failed.
    """
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(task)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
