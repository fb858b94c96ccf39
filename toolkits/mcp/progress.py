"""A call's progress reports, handed on in the order they arrived (see `progress_in_order`)."""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

import anyio
from mcp.shared.dispatcher import ProgressFnT

from ..base import ProgressCallback

__all__ = ["progress_in_order"]

log = logging.getLogger(__name__)

_Report = tuple[float, float | None, str | None]


@asynccontextmanager
async def progress_in_order(
    on_progress: ProgressCallback | None, alive: Callable[[], None]
) -> AsyncGenerator[ProgressFnT]:
    """A progress callback for the SDK that hands reports to `on_progress` in arrival order.

    The SDK runs each progress callback in a task of its own, so a slow `on_progress` (one
    that relays the report to our own client) could still be running, or be overtaken by the
    next report, when the result arrives; the last reports would then reach the client after
    the result, which ends the client's request: lost. Here each report is queued the moment
    it arrives (its task's first step, before the result can wake the caller), one task
    delivers them in order, and leaving the block waits until every queued report is delivered.
    """
    if on_progress is None:

        async def just_alive(progress: float, total: float | None, message: str | None) -> None:
            alive()

        yield just_alive
        return
    send, receive = anyio.create_memory_object_stream[_Report](math.inf)

    async def queue(progress: float, total: float | None, message: str | None) -> None:
        alive()
        with contextlib.suppress(anyio.ClosedResourceError):  # a report after the result
            send.send_nowait((progress, total, message))

    async def deliver() -> None:
        async with receive:
            async for report in receive:
                try:
                    await on_progress(*report)
                except Exception:  # as the SDK does: a caller's bug must not fail the call
                    log.exception("progress callback raised")

    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(deliver)
        async with send:
            try:
                yield queue
            except Exception as exc:  # re-raised below as itself, not in an ExceptionGroup
                error = exc
                tg.cancel_scope.cancel()
    if error is not None:
        raise error
