"""Whether the process an `execution` event names still runs the run: a zombie (killed, not
yet reaped by its parent) does not, nor does another process that got its pid later."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from gateway.durable.status import this_process, working_elsewhere

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux's /proc")


@needs_proc
def test_a_zombie_process_runs_nothing() -> None:
    here = this_process()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie
        execution = {"host": here["host"], "pid": child.pid, "stopped": None}
        assert not working_elsewhere(execution, here)
    finally:
        child.wait()


@needs_proc
def test_a_live_process_runs_it_unless_its_pid_was_reused() -> None:
    here = this_process()
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        started = start_time(child.pid)
        execution: dict[str, Any] = {**here, "pid": child.pid, "since": started, "stopped": None}
        assert working_elsewhere(execution, here)
        assert not working_elsewhere({**execution, "since": started + 1}, here)
        assert working_elsewhere({**execution, "since": None}, here)  # an older event: no time
        assert not working_elsewhere({**execution, "stopped": "interrupted"}, here)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def start_time(pid: int) -> int:
    """When process `pid` started, as `this_process()` records it (clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as file:
        return int(file.read().rsplit(")", 1)[1].split()[19])
