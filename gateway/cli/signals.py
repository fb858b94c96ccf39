"""Ending on SIGTERM and SIGHUP the way Ctrl-C ends a command: by cancelling it.

Without this, either signal kills the process on the spot, and nothing it started (MCP
servers over stdio, HTTP connections) is closed. Cancelling the command instead unwinds it:
every server is stopped and every connection closed before the process exits with 128 + the
signal's number, as a shell reports it.

What must happen before the unwinding starts registers with `on_signal`: a replica handing
its runs over rather than stopping them, an HTTP server letting the calls in flight finish
(the listener returns what to wait for). A second signal stops the waiting, Ctrl-C too.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.abc

from toolkits import in_background

__all__ = ["interrupts", "on_signal", "until_signalled"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""What ends a command after its listeners' waits. SIGINT before them is left to the event
loop's own handler, which cancels the command at once, as Ctrl-C always did."""

Listener = Callable[[], Awaitable[None] | None]
"""Called when a signal arrives; what it returns (if anything) is awaited before unwinding."""

_listeners: ContextVar[list[Listener] | None] = ContextVar(
    "agent_gateway_signal_listeners", default=None
)


@contextmanager
def on_signal(listener: Listener) -> Generator[None]:
    """While the block runs, `listener()` is called when a signal arrives, before the command
    is cancelled, and what it returns is awaited (outside `until_signalled`, never)."""
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
    listeners: list[Listener] = []
    code = 0
    token = _listeners.set(listeners)
    with anyio.CancelScope() as command:

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with anyio.open_signal_receiver(*SIGNALS) as received:
                task_status.started()
                async for signum in received:
                    signalled.append(signum)
                    break
                waits = [w for listener in list(listeners) if (w := listener()) is not None]
                # While they wait, Ctrl-C is a second signal too: the loop's own handler
                # would cancel only the task that runs the command, not the waits. After
                # them, the loop's handler is back (not Python's, which raises anywhere).
                with (
                    _restored(signal.SIGINT),
                    anyio.open_signal_receiver(signal.SIGINT) as interrupted,
                ):
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(_wait_then_cancel, waits, tg.cancel_scope)
                        for second in (received, interrupted):  # no more waiting
                            tg.start_soon(_cancel_on_next, second, tg.cancel_scope)
            command.cancel()

        try:
            async with in_background(watch):
                code = await handler(args)
        finally:
            _listeners.reset(token)
    return 128 + signalled[0] if signalled else code


@contextmanager
def interrupts() -> Generator[AsyncIterator[signal.Signals]]:
    """Ctrl-C (SIGINT) as signals to receive during the block, instead of the event loop's
    handler cancelling the whole command; that handler is back after it (the loop alone would
    put back Python's, which raises `KeyboardInterrupt` anywhere)."""
    with _restored(signal.SIGINT), anyio.open_signal_receiver(signal.SIGINT) as received:
        yield received


@contextmanager
def _restored(signum: signal.Signals) -> Generator[None]:
    previous = signal.getsignal(signum)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signum, previous)


async def _cancel_on_next(signals: AsyncIterator[signal.Signals], scope: anyio.CancelScope) -> None:
    await anext(signals)
    scope.cancel()


async def _wait_then_cancel(waits: list[Awaitable[None]], scope: anyio.CancelScope) -> None:
    try:
        for wait in waits:
            await wait
    finally:  # a second signal: what was not awaited never will be (no "never awaited" warning)
        for wait in waits:
            if isinstance(wait, Coroutine):
                wait.close()
    scope.cancel()
