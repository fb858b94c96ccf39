"""SIGTERM ends a command as Ctrl-C does, after what its listeners wait for (`gateway.cli.signals`).

The signals go to this very process: `until_signalled` receives them before any test code sends
one, and puts back the handlers there were when it returns.
"""

from __future__ import annotations

import gc
import os
import signal
from collections.abc import Awaitable, Callable
from types import FrameType

import anyio
import anyio.lowlevel
import pytest

from gateway.cli.signals import on_signal, until_signalled

pytestmark = pytest.mark.anyio


async def test_one_signal_waits_for_the_listeners_then_cancels_the_command() -> None:
    order: list[str] = []

    async def drain() -> None:
        order.append("draining")
        await anyio.lowlevel.checkpoint()
        order.append("drained")

    async def command(_: object) -> int:
        with on_signal(drain):
            os.kill(os.getpid(), signal.SIGTERM)
            try:
                await anyio.sleep_forever()
            finally:
                order.append("cancelled")
        return 0

    with anyio.fail_after(5):
        code = await until_signalled(command, None)
    assert code == 128 + signal.SIGTERM
    assert order == ["draining", "drained", "cancelled"]


async def test_a_signal_ignored_at_the_start_stays_ignored_and_handlers_are_put_back() -> None:
    """Started under `nohup` (SIGHUP ignored), a command stopped at a hangup all the same; and
    after it, SIGHUP and SIGTERM were left at their default actions (a library caller of
    `main()` under nohup then died at a hangup), whatever they had been."""

    def own(signum: int, frame: FrameType | None) -> None:
        del signum, frame

    async def command(_: object) -> int:
        os.kill(os.getpid(), signal.SIGHUP)  # ignored: not delivered, the command goes on
        os.kill(os.getpid(), signal.SIGTERM)
        await anyio.sleep_forever()
        return 0

    before = {signum: signal.getsignal(signum) for signum in (signal.SIGHUP, signal.SIGTERM)}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, own)
    try:
        with anyio.fail_after(5):
            code = await until_signalled(command, None)
        after = signal.getsignal(signal.SIGHUP), signal.getsignal(signal.SIGTERM)
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
    assert code == 128 + signal.SIGTERM
    assert after == (signal.SIG_IGN, own)


async def test_a_second_signal_stops_the_waiting_and_leaves_no_listener_unawaited() -> None:
    started: list[str] = []

    def waiting(name: str) -> Callable[[], Awaitable[None]]:
        async def wait() -> None:
            started.append(name)
            await anyio.sleep_forever()

        return wait

    async def command(_: object) -> int:
        with on_signal(waiting("first")), on_signal(waiting("second")):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            await anyio.sleep_forever()
        return 0

    with anyio.fail_after(5):
        code = await until_signalled(command, None)
    gc.collect()  # a coroutine never awaited would warn here (warnings are errors)
    assert code == 128 + signal.SIGTERM
    assert "second" not in started


async def test_ctrl_c_after_a_signal_stops_the_waiting_too() -> None:
    waiting = anyio.Event()
    stray: list[int] = []  # a SIGINT that reached the process's own handler

    async def wait() -> None:
        waiting.set()
        await anyio.sleep_forever()

    async def command(_: object) -> int:
        with on_signal(wait):
            os.kill(os.getpid(), signal.SIGTERM)
            await waiting.wait()
            os.kill(os.getpid(), signal.SIGINT)
            await anyio.sleep_forever()
        return 0

    def record(signum: int, _frame: object) -> None:
        stray.append(signum)

    previous = signal.signal(signal.SIGINT, record)
    try:
        with anyio.fail_after(5):
            code = await until_signalled(command, None)
        restored = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert code == 128 + signal.SIGTERM
    assert stray == []
    assert restored is record  # put back once the waiting ended


async def test_a_signal_while_the_command_unwinds_is_received_not_fatal() -> None:
    # GNU `timeout` sends SIGTERM twice at once; the command takes seconds to unwind (servers
    # stop, a run is stored). The second must find a handler, not the default action that
    # kills the process before it says anything.
    unwound: list[object] = []

    async def command(_: object) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.lowlevel.checkpoint()
                caught = signal.getsignal(signal.SIGTERM)
                unwound.append(caught)
                if caught not in (signal.SIG_DFL, None):  # else it would kill the test run
                    os.kill(os.getpid(), signal.SIGTERM)
                    await anyio.lowlevel.checkpoint()
                unwound.append("done")
        return 0

    with anyio.fail_after(5):
        code = await until_signalled(command, None)
    assert code == 128 + signal.SIGTERM
    assert unwound[0] not in (signal.SIG_DFL, None)
    assert unwound[1] == "done"
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # not our process: put back
