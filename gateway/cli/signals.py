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

__all__ = ["until_signalled"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


async def until_signalled(handler: Callable[[Any], Awaitable[int]], args: Any) -> int:
    """`await handler(args)`, or 128 + signum once one of `SIGNALS` arrived and it unwound."""
    outcome: list[int] = []
    async with anyio.create_task_group() as tg:

        async def run() -> None:
            outcome.append(await handler(args))
            tg.cancel_scope.cancel()

        async def watch() -> None:
            with anyio.open_signal_receiver(*SIGNALS) as received:
                async for signum in received:
                    outcome.append(128 + signum)
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(watch)
        tg.start_soon(run)
    return outcome[0]
