"""Ending on SIGTERM and SIGHUP the way Ctrl-C ends a command: by cancelling it.

Without this, either signal kills the process on the spot, and nothing it started (MCP
servers over stdio, HTTP connections) is closed. Cancelling the command instead unwinds it:
every server is stopped and every connection closed before the process exits with 128 + the
signal's number, as a shell reports it.

What must happen before the unwinding starts (a replica handing its runs over rather than
stopping them) registers with `on_signal`.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.abc

from toolkits import in_background

__all__ = ["on_signal", "until_signalled"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_listeners: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "agent_gateway_signal_listeners", default=None
)


@contextmanager
def on_signal(listener: Callable[[], None]) -> Generator[None]:
    """While the block runs, `listener()` is called when a signal arrives, before the command
    is cancelled (outside `until_signalled`, never)."""
    listeners = _listeners.get()
    if listeners is None:
        yield
        return
    listeners.append(listener)
    try:
        yield
    finally:
        listeners.remove(listener)


async def until_signalled(handler: Callable[[Any], Awaitable[int]], args: Any) -> int:
    """`await handler(args)`, or 128 + signum once one of `SIGNALS` arrived and it unwound.

    The handler's errors come out as themselves, not wrapped in an `ExceptionGroup`.
    """
    signalled: list[int] = []
    listeners: list[Callable[[], None]] = []
    code = 0
    token = _listeners.set(listeners)
    with anyio.CancelScope() as command:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(*SIGNALS) as received:
                task_status.started()
                async for signum in received:
                    signalled.append(signum)
                    for listener in list(listeners):
                        listener()
                    command.cancel()
                    return

        try:
            async with in_background(watch):
                code = await handler(args)
        finally:
            _listeners.reset(token)
    return 128 + signalled[0] if signalled else code
