"""Ending on SIGTERM and SIGHUP the way Ctrl-C ends a command: by cancelling it.

Without this, either signal kills the process on the spot, and nothing it started (MCP
servers over stdio, HTTP connections) is closed. Cancelling the command instead unwinds it:
every server is stopped and every connection closed before the process exits with 128 + the
signal's number, as a shell reports it.

What must happen before the unwinding starts registers with `on_signal`: a replica handing
its runs over rather than stopping them, a server (HTTP or stdio) letting the calls in flight
finish (the listener returns what to wait for). A second signal stops the waiting, Ctrl-C too.
While the command unwinds, one more ends the stdio MCP servers at once; none kills the process
mid-way (GNU `timeout` sends two at once), and in a process of our own the signals are
ignored from the unwinding's end to the exit.

Ctrl-C itself is the event loop's: the first cancels the command, the second raises
`KeyboardInterrupt` wherever the program is. Around that, what registers with
`on_interrupt` hears the first at once (a status line says it is stopping: MCP servers take
a moment), and the second ends the stdio MCP servers this process started (their process
groups): in sessions of their own, the terminal's Ctrl-C never reached them, and the
unwinding that would have stopped them is cut short.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import threading
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from types import FrameType
from typing import Any, TypeVar

import anyio
import anyio.abc

from toolkits import in_background
from toolkits.mcp.stdio_pipe import kill_stdio_servers

from ..console import RunConsole
from .output import printed_around

__all__ = ["interrupts", "on_interrupt", "on_signal", "stopping_shown", "until_signalled"]

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""What ends a command after its listeners' waits. SIGINT before them is left to the event
loop's own handler, which cancels the command at once, as Ctrl-C always did."""

Listener = Callable[[], Awaitable[None] | None]
"""Called when a signal arrives; what it returns (if anything) is awaited before unwinding."""

_L = TypeVar("_L")

_listeners: ContextVar[list[Listener] | None] = ContextVar(
    "agent_gateway_signal_listeners", default=None
)


_interrupt_listeners: ContextVar[list[Callable[[], None]] | None] = ContextVar(
    "agent_gateway_interrupt_listeners", default=None
)


@contextmanager
def on_interrupt(listener: Callable[[], None]) -> Generator[None]:
    """While the block runs, `listener()` is called in the event loop at the first Ctrl-C,
    as the command starts to unwind (outside `until_signalled`, never)."""
    with _listening(_interrupt_listeners, listener):
        yield


@asynccontextmanager
async def stopping_shown(
    console: AbstractAsyncContextManager[RunConsole],
) -> AsyncGenerator[RunConsole]:
    """`console`, whose status says the command is stopping from the first Ctrl-C on, and
    around whose status what tools print is written; once it has stopped, a line says so
    unless the command said why it stopped."""
    shown: RunConsole | None = None
    try:
        async with console as opened:
            shown = opened
            with on_interrupt(opened.stopping), printed_around(opened):
                yield opened
    finally:
        note = shown.stopped_note() if shown is not None else None
        if note is not None:
            print(note, file=sys.stderr, flush=True)


@contextmanager
def on_signal(listener: Listener) -> Generator[None]:
    """While the block runs, `listener()` is called when a signal arrives, before the command
    is cancelled, and what it returns is awaited (outside `until_signalled`, never)."""
    with _listening(_listeners, listener):
        yield


@contextmanager
def _listening(registry: ContextVar[list[_L] | None], listener: _L) -> Generator[None]:
    """`listener` in the list `registry` holds (if any: outside `until_signalled`, none)."""
    listeners = registry.get()
    if listeners is None:
        yield
        return
    listeners.append(listener)
    try:
        yield
    finally:
        listeners.remove(listener)


async def until_signalled(handler: Callable[[Any], Awaitable[int]], args: Any) -> int:
    """`await handler(args)`, or 128 + signum once one of `SIGNALS` arrived and it unwound
    (`args.signals`, if the command sets it: `serve` adds SIGINT, so that Ctrl-C gives calls
    in flight their grace as SIGTERM does).

    The handler's errors come out as themselves, not wrapped in an `ExceptionGroup`.
    """
    # One the process was started with ignored stays so (`nohup`'s SIGHUP: a hangup must not
    # stop it), as the kernel then never delivers it.
    wanted: tuple[signal.Signals, ...] = getattr(args, "signals", SIGNALS)
    signals = tuple(s for s in wanted if signal.getsignal(s) is not signal.SIG_IGN)
    signalled: list[int] = []
    listeners: list[Listener] = []
    code = 0
    token = _listeners.set(listeners)
    heard: list[Callable[[], None]] = []
    heard_token = _interrupt_listeners.set(heard)
    # The command alone: `watch` goes on beside it while it unwinds (see below).
    command = anyio.CancelScope()
    with _noting_interrupts(heard):

        async def watch(*, task_status: anyio.abc.TaskStatus[None]) -> None:
            with _restored(*signals), anyio.open_signal_receiver(*signals) as received:
                task_status.started()
                async for signum in received:
                    signalled.append(signum)
                    break
                for told in list(heard):  # it stops as Ctrl-C stops it: the console says so
                    told()
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
                # Still received while the command unwinds (seconds: MCP servers stop, a
                # run is stored): left to the default action, a second signal (GNU `timeout`
                # sends two at once) would kill the process mid-way, saying nothing. One
                # more ends the stdio servers at once, as a second Ctrl-C does.
                async for _ in received:
                    kill_stdio_servers()

        try:
            async with in_background(watch):
                with command:
                    code = await handler(args)
        finally:
            _listeners.reset(token)
            _interrupt_listeners.reset(heard_token)
            if signalled and getattr(args, "own_process", False):
                # From here to the exit (the loop closing, its threads joined), too.
                for signum in signals:
                    signal.signal(signum, signal.SIG_IGN)
    return 128 + signalled[0] if signalled else code


@contextmanager
def _noting_interrupts(listeners: list[Callable[[], None]]) -> Generator[None]:
    """Ctrl-C's handler (the event loop's) with `listeners` told of the first, in the loop,
    and the stdio servers ended at the second, before the handler does what it does."""
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or threading.current_thread() is not threading.main_thread():
        # Ignored (SIG_IGN), not set from Python, or not ours to set (only the main thread's)
        yield
        return
    loop = asyncio.get_running_loop()
    count = 0

    def tell() -> None:
        for listener in list(listeners):
            listener()

    def noted(signum: int, frame: FrameType | None) -> Any:
        nonlocal count
        count += 1
        if count == 1:
            loop.call_soon_threadsafe(tell)
        else:
            kill_stdio_servers()
        return previous(signum, frame)

    signal.signal(signal.SIGINT, noted)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGINT) is noted:
            signal.signal(signal.SIGINT, previous)


@contextmanager
def interrupts() -> Generator[AsyncIterator[signal.Signals]]:
    """Ctrl-C (SIGINT) as signals to receive during the block, instead of the event loop's
    handler cancelling the whole command; that handler is back after it (the loop alone would
    put back Python's, which raises `KeyboardInterrupt` anywhere)."""
    with _restored(signal.SIGINT), anyio.open_signal_receiver(signal.SIGINT) as received:
        yield received


@contextmanager
def _restored(*signums: signal.Signals) -> Generator[None]:
    """Each of `signums` handled after the block as before it: a signal receiver's end would
    leave the default action (SIGINT: Python's handler), whatever there was."""
    previous = {signum: signal.getsignal(signum) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)


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
