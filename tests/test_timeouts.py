"""Every test's timeout stops it (`tests/timeouts.py`): checked on a pytest run of its own, on
tests that hang where pytest-timeout's alarm alone would not stop them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.durable.cli_runs import REPO

HANGING = '''
import signal
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

RAN_ON = Path("ran-on")
"""Written by a test that was not stopped by its timeout."""


@given(st.integers())
@settings(max_examples=2)
def test_a_hypothesis_test(n: int) -> None:  # leaves hypothesis' callback in gc.callbacks
    assert isinstance(n, int)


@pytest.mark.timeout(1)
def test_allocating() -> None:
    started = time.monotonic()
    while time.monotonic() - started < 10:
        junk = [[i] for i in range(1000)]  # collections, each running hypothesis' callback
        del junk
    RAN_ON.write_text("allocating")


class WaitsWhenFreed:
    def __del__(self) -> None:
        threading.Event().wait(10)  # the alarm lands here, where exceptions are dropped


@pytest.mark.timeout(1)
def test_finalizing() -> None:
    WaitsWhenFreed()
    threading.Event().wait(10)
    RAN_ON.write_text("finalizing")


@pytest.mark.timeout(1)
def test_deaf_to_alarms() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
    threading.Event().wait(10)
    RAN_ON.write_text("deaf")


def test_after() -> None:
    pass
'''

CONFTEST = """
import tests.timeouts
from tests.timeouts import pytest_timeout_cancel_timer, pytest_timeout_set_timer

tests.timeouts.GRACE = 1.0
"""


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 60\nfilterwarnings = error\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )


@pytest.mark.integration
@pytest.mark.parametrize(
    "hanging",
    [
        "test_hanging.py::test_a_hypothesis_test test_hanging.py::test_allocating",
        "test_hanging.py::test_finalizing",
    ],
    ids=["in-hypothesis-gc-callback", "in-a-finalizer"],
)
def test_a_timeout_that_lands_where_exceptions_are_dropped_still_fails_the_test(
    tmp_path: Path, hanging: str
) -> None:
    """pytest-timeout's alarm raised inside hypothesis' gc callback (or a `__del__`) was
    'Exception ignored', and the test ran on past its timeout."""
    done = run_pytest(tmp_path, *hanging.split(), "test_hanging.py::test_after")
    assert not (tmp_path / "ran-on").exists(), done.stdout
    assert f"FAILED {hanging.split()[-1]} - Failed: Timeout (>1.0s)" in done.stdout, done.stdout
    assert "Unraisable" not in done.stdout, done.stdout  # the timeout alone is reported
    assert re.search(r"^1 failed, \d passed in ", done.stdout, re.MULTILINE), done.stdout
    assert done.returncode == 1


@pytest.mark.integration
@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["one-process", "xdist"])
def test_a_test_the_alarm_cannot_stop_ends_its_process_saying_which_test_hung(
    tmp_path: Path, workers: list[str]
) -> None:
    done = run_pytest(tmp_path, *workers, "test_hanging.py::test_deaf_to_alarms")
    assert not (tmp_path / "ran-on").exists(), done.stdout
    assert done.returncode != 0
    if workers:  # CI's -n 3: the controller names the test its worker was running
        assert (
            "worker 'gw0' crashed while running 'test_hanging.py::test_deaf_to_alarms'"
            in done.stdout
        ), done.stdout
    else:
        assert (
            "test_hanging.py::test_deaf_to_alarms still running 1 s after its 1 s timeout"
            in done.stdout
        ), done.stdout
        assert "in test_deaf_to_alarms" in done.stdout  # its stack
