"""The suite's own machinery, checked on pytest runs of their own: every test's timeout stops
it, even where pytest-timeout's alarm alone would not; Ctrl-C stops the run during a test
serving HTTP (`tests/stopping.py`, `tests/servers/asgi.py`); and a run started with Ctrl-C and
Ctrl-\\ ignored gives the processes it starts both (`tests/conftest.py`)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.durable.cli_runs import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

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

SERVING = """
import anyio
import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from tests.servers.asgi import serve_on_loopback

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def endless(request: Request) -> StreamingResponse:
    async def chunks():
        yield b"first"
        await anyio.sleep_forever()

    return StreamingResponse(chunks())


async def test_streaming() -> None:
    app = Starlette(routes=[Route("/", endless)])
    async with serve_on_loopback(app) as url, httpx.AsyncClient() as client:
        async with client.stream("GET", url) as response:
            async for _ in response.aiter_bytes():
                print("streaming", flush=True)
                await anyio.sleep_forever()


async def test_interrupted_in_a_task_group() -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep_forever)
        raise KeyboardInterrupt  # as a Ctrl-C does that lands in this body


def test_after() -> None:
    print("ran after", flush=True)
"""

CONFTEST = """
import tests.stopping
from tests.stopping import (
    pytest_runtest_call,
    pytest_runtest_setup,
    pytest_runtest_teardown,
    pytest_timeout_cancel_timer,
    pytest_timeout_set_timer,
)

tests.stopping.GRACE = 1.0
"""


def pytest_in(tmp_path: Path, *args: str) -> list[str]:
    """A pytest command for the suite written in `tmp_path` (started there, with this repo on
    PYTHONPATH)."""
    (tmp_path / "test_hanging.py").write_text(HANGING)
    (tmp_path / "test_serving.py").write_text(SERVING)
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text("[pytest]\ntimeout = 60\nfilterwarnings = error\n")
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]


def run_pytest(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        pytest_in(tmp_path, *args),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=ENV,
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


@pytest.mark.integration
def test_ctrl_c_stops_the_run_during_a_test_serving_on_loopback(tmp_path: Path) -> None:
    """uvicorn took SIGINT over while serving: a Ctrl-C only began its graceful shutdown, which
    waits for the open stream to end (here never), while the test ran on."""
    command = pytest_in(
        tmp_path,
        "-p",
        "anyio",
        "-s",
        "test_serving.py::test_streaming",
        "test_serving.py::test_after",
    )
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=tmp_path, env=ENV
    ) as pytest_run:
        try:
            assert pytest_run.stdout is not None
            heard = ""
            while "streaming" not in heard:
                line = pytest_run.stdout.readline()
                assert line, heard  # the run ended before streaming
                heard += line
            pytest_run.send_signal(signal.SIGINT)  # one Ctrl-C
            rest, _ = pytest_run.communicate(timeout=30)
        finally:
            pytest_run.kill()
    assert pytest_run.returncode == 2, heard + rest  # interrupted
    assert "KeyboardInterrupt" in rest, rest
    assert "ran after" not in rest, rest


@pytest.mark.integration
def test_ctrl_c_in_a_task_groups_body_stops_the_run(tmp_path: Path) -> None:
    """It reached pytest inside a BaseExceptionGroup: a failed test, and the run went on."""
    done = run_pytest(
        tmp_path,
        "-p",
        "anyio",
        "-s",
        "test_serving.py::test_interrupted_in_a_task_group",
        "test_serving.py::test_after",
    )
    assert done.returncode == 2, done.stdout  # interrupted
    assert "KeyboardInterrupt" in done.stdout, done.stdout
    assert "ran after" not in done.stdout, done.stdout


def test_a_run_started_ignoring_ctrl_c_and_ctrl_backslash_starts_processes_heeding_both() -> None:
    """A background job of a non-interactive shell starts with SIGINT and SIGQUIT ignored, and
    the gateways a test starts would inherit that: the conftest put SIGINT back but not
    SIGQUIT, and the Ctrl-\\ test failed whenever pytest ran so."""
    ignored = "import signal; print([signal.getsignal(s) == signal.SIG_IGN for s in (2, 3)])"
    starts = f"import subprocess, sys, tests.conftest; subprocess.run([sys.executable, '-c', {ignored!r}])"
    done = subprocess.run(
        ["sh", "-c", 'trap "" INT QUIT; exec "$0" "$@"', sys.executable, "-c", starts],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=ENV,
        timeout=60,
    )
    assert done.stdout == "[False, False]\n", done.stderr
