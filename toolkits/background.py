"""Running a long-lived task for the length of an `async with` block.

The block's own error comes out as itself, not wrapped in the task group's `ExceptionGroup`,
which is what a caller catching `ToolkitError` (say) needs. Nodes own their sessions this way,
and the gateway its serving runs and signal watcher.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Coroutine
from contextlib import AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.abc

__all__ = ["InBackground", "in_background"]


@asynccontextmanager
async def in_background(
    run: Callable[..., Coroutine[Any, Any, None]], *, wait_started: bool = True
) -> AsyncGenerator[anyio.abc.TaskGroup]:
    """Run `run` beside the block, and cancel it when the block ends.

    With `wait_started`, `run(task_status=...)` is started and its `started()` awaited first;
    otherwise `run()` is only scheduled (a clock, a heartbeat). Yields the task group, for more
    tasks that end with the block. An error raised in the block comes out as itself: the
    background tasks are never what failed (they only end by cancellation).
    """
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        if wait_started:
            await tg.start(run)
        else:
            tg.start_soon(run)
        try:
            yield tg
        except Exception as exc:
            error = exc
        finally:
            tg.cancel_scope.cancel()
    if error is not None:
        raise error


class InBackground:
    """`async with obj:` runs `obj.run` in the background for the block (see `in_background`)."""

    _exit_stack: AsyncExitStack | None = None

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        async with AsyncExitStack() as stack:
            await stack.enter_async_context(in_background(self.run))
            self._exit_stack = stack.pop_all()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        stack, self._exit_stack = self._exit_stack, None
        if stack is not None:
            return await stack.__aexit__(exc_type, exc_val, exc_tb)
        return None
