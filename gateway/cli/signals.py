"""Ending on SIGTERM and SIGHUP the way Ctrl-C ends a command: by cancelling it.

Without this, either signal kills the process on the spot, and nothing it started (MCP
servers over stdio, HTTP connections) is closed. Cancelling the command instead unwinds it:
every server is stopped and every connection closed before the process exits with 128 + the
signal's number, as a shell reports it.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc

from toolkits import in_background

__all__ = ["until_signalled"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


async def until_signalled(handler: Callable[[Any], Awaitable[int]], args: Any) -> int:
    """`await handler(args)`, or 128 + signum once one of `SIGNALS` arrived and it unwound.

    The handler's errors come out as themselves, not wrapped in an `ExceptionGroup`.
    """
    signalled: list[int] = []
    code = 0
    with anyio.CancelScope() as command:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(*SIGNALS) as received:
                task_status.started()
                async for signum in received:
                    signalled.append(signum)
                    command.cancel()
                    return

        async with in_background(watch):
            code = await handler(args)
    return 128 + signalled[0] if signalled else code
