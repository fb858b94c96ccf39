"""A test run that stops: every test's timeout stops the test, and Ctrl-C stops the run.

pytest-timeout raises `Failed` wherever the main thread is when SIGALRM arrives. When that is
inside code whose exceptions Python reports and drops (a `gc.callbacks` entry, which hypothesis
keeps once a `@given` test has run; a `__del__`; a weakref callback), the test would run on.
So here (the hooks pytest-timeout offers for other strategies):

- a timeout that reaches `sys.unraisablehook` is raised again `RETRY` seconds later, until it
  lands in the test: the test fails as timed out and the run goes on;
- a thread fires `GRACE` seconds after the timeout whatever the main thread does (SIGALRM
  blocked, a C call that never returns to Python, a teardown that hangs after the timeout):
  it names the test, dumps every thread's stack and ends the process, as pytest-timeout's
  thread method does. Under pytest-xdist the controller then reports "worker 'gwN' crashed
  while running '<the test>'" and starts another worker.

A Ctrl-C that lands in a task group's body reaches pytest inside a BaseExceptionGroup, which it
takes for a failed test, and the run would go on: the phase hooks hand pytest the
KeyboardInterrupt. `tests/conftest.py` imports the hooks.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Generator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import pytest
import pytest_timeout

RETRY = 0.05
"""Seconds before a dropped timeout is raised again."""
GRACE = 30.0
"""Seconds after the timeout before the process is ended: room for the teardown of a test
that did stop (servers to stop, clusters to remove)."""


@dataclass
class _Armed:
    backstop: threading.Timer
    previous_hook: Callable[[sys.UnraisableHookArgs], object]  # pytest's own
    raised: list[BaseException] = field(default_factory=list[BaseException])

    def unraisable(self, unraisable: sys.UnraisableHookArgs) -> None:
        if any(failed is unraisable.exc_value for failed in self.raised):
            # Dropped where exceptions cannot propagate: raise it again in a moment.
            signal.setitimer(signal.ITIMER_REAL, RETRY)
            return
        self.previous_hook(unraisable)


_ARMED = pytest.StashKey[_Armed]()


def _end_the_process(item: pytest.Item, settings: Any) -> None:
    writer = item.config.get_terminal_writer()
    writer.line(
        f"{item.nodeid} still running {GRACE:g} s after its {settings.timeout:g} s timeout:"
        " ending the process"
    )
    # pytest-timeout's thread method: dumps the stacks, then os._exit(1)
    pytest_timeout.timeout_timer(item, settings)  # pyright: ignore[reportUnknownMemberType]


@pytest.hookimpl(optionalhook=True)  # pytest-timeout's hook: unknown without the plugin
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    if settings.method != "signal" or threading.current_thread() is not threading.main_thread():
        return None  # pytest-timeout's thread method: nothing to make sure of
    backstop = threading.Timer(settings.timeout + GRACE, _end_the_process, (item, settings))
    backstop.name = f"timeout backstop {item.nodeid}"
    backstop.daemon = True
    armed = _Armed(backstop, sys.unraisablehook)

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        __tracebackhide__ = True
        try:
            if armed.raised:  # the stacks were dumped the first time
                pytest.fail(pytest_timeout.PYTEST_FAILURE_MESSAGE % settings.timeout)
            pytest_timeout.timeout_sigalrm(item, settings)  # pyright: ignore[reportUnknownMemberType]
        except pytest.fail.Exception as failed:
            armed.raised.append(failed)
            raise

    item.stash[_ARMED] = armed
    sys.unraisablehook = armed.unraisable
    signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, settings.timeout)
    backstop.start()
    return True


@pytest.hookimpl(optionalhook=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool | None:
    armed = item.stash.get(_ARMED, None)
    if armed is None:
        return None  # not armed here (thread method, or skipped before setup)
    del item.stash[_ARMED]
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    armed.backstop.cancel()
    armed.backstop.join()
    if sys.unraisablehook == armed.unraisable:
        sys.unraisablehook = armed.previous_hook
    return True


@contextmanager
def _ctrl_c_unwrapped() -> Generator[None]:
    try:
        yield
    except BaseExceptionGroup as group:
        if group.subgroup(KeyboardInterrupt) is None:
            raise
        raise KeyboardInterrupt from group


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None]:
    with _ctrl_c_unwrapped():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None]:
    with _ctrl_c_unwrapped():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None]:
    with _ctrl_c_unwrapped():
        return (yield)
