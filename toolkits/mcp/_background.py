"""Running a long-lived task for the length of an `async with` block."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["in_background"]


@asynccontextmanager
async def in_background(
    run: Callable[..., Coroutine[Any, Any, None]],
) -> AsyncGenerator[None]:
    """Start `run(task_status=...)` and wait for its `started()`; cancel it when the block ends.

    An error raised in the block comes out as itself, not wrapped in the task group's
    `ExceptionGroup` (the background task only ends by cancellation).
    """
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        await tg.start(run)
        try:
            yield
        except Exception as exc:
            error = exc
        finally:
            tg.cancel_scope.cancel()
    if error is not None:
        raise error
