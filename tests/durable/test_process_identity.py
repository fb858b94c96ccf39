"""Whether the process an `execution` event names still runs the run, as `runs show` tells
it: a zombie (killed, not yet reaped by its parent) does not, nor does another process that
got its pid later; the run shows as stopped, its process ended."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

import pytest

from gateway.durable.status import RunInfo, run_info

needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux's /proc")


def shown(execution: dict[str, Any]) -> RunInfo:
    """The run a DBOS row still PENDING and `execution` make."""
    row = SimpleNamespace(
        workflow_id="r1", status="PENDING", input=None, error=None, created_at=1, updated_at=2
    )
    return run_info(row, execution)


@needs_proc
def test_a_run_whose_process_is_a_zombie_has_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # ended, not reaped: a zombie
        info = shown({"host": socket.gethostname(), "pid": child.pid, "stopped": None})
        assert (info.status, info.orphaned) == ("stopped", True)
        assert info.error == f"its process ({child.pid}) ended before the run did"
    finally:
        child.wait()


@needs_proc
def test_a_run_runs_in_its_live_process_unless_its_pid_was_reused() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    try:
        started = start_time(child.pid)
        here = {"host": socket.gethostname(), "pid": child.pid, "stopped": None}
        assert shown({**here, "since": started}).status == "running"
        reused = shown({**here, "since": started + 1})  # another process had that pid
        assert (reused.status, reused.orphaned) == ("stopped", True)
        assert shown({**here, "since": None}).status == "running"  # an older event: no time
        interrupted = shown({**here, "since": started, "stopped": "interrupted"})
        assert (interrupted.status, interrupted.error) == ("stopped", "interrupted")
        elsewhere = shown({**here, "host": "another-machine", "pid": 1})
        assert (elsewhere.status, elsewhere.host) == ("running", "another-machine")
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def start_time(pid: int) -> int:
    """When process `pid` started, as `this_process()` records it (clock ticks since boot)."""
    with open(f"/proc/{pid}/stat") as file:
        return int(file.read().rsplit(")", 1)[1].split()[19])
