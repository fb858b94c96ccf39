"""Functions that tests load as configured tools (`python = "tests.sample_tools:NAME"`)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import anyio

from toolkits import CallInfo


def shout(text: str, times: int = 1) -> str:
    """Repeat a text in capitals."""
    return " ".join([text.upper()] * times)


def whose_call(question: str, info: CallInfo) -> dict[str, object]:
    """Say who and what the call is for (the run's context, its agent and session)."""
    return {
        "question": question,
        "context": dict(info.context),
        "agent": info.agent,
        "session_id": info.session_id,
        "run_id": info.run_id,
    }


async def wait_until_cancelled(marker: str) -> str:
    """Wait until the call is cancelled; then write "cancelled" to the file `marker`.

    Each step is also a line on stderr (`wait_until_cancelled: started`, `...: cancelled`), for
    a test to await where the tool runs in another process.
    """
    print("wait_until_cancelled: started", file=sys.stderr, flush=True)
    try:
        await anyio.Event().wait()
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.Path(marker).write_text("cancelled")
        print("wait_until_cancelled: cancelled", file=sys.stderr, flush=True)
    return "released"


async def released_by(fifo: str) -> str:
    """Wait for a line on the named pipe `fifo` and answer it (`released_by: started` on
    stderr once it waits)."""
    print("released_by: started", file=sys.stderr, flush=True)

    def read() -> str:
        with open(fifo, encoding="utf-8") as released:
            return released.readline().strip()

    return await anyio.to_thread.run_sync(read, abandon_on_cancel=True)


def sleep_blocking(seconds: float) -> str:
    """Block the calling thread for `seconds` (`sleep_blocking: started` on stderr first)."""
    print("sleep_blocking: started", file=sys.stderr, flush=True)
    time.sleep(seconds)
    return "slept"


def hand_over(fifo: str, path: str) -> str:
    """Start a thread that copies a line from the named pipe `fifo` to the file `path`, and
    return at once: work a tool leaves to a thread of its own, which the process must finish."""

    def copy() -> None:
        with open(fifo, encoding="utf-8") as given:
            Path(path).write_text(given.readline(), encoding="utf-8")

    threading.Thread(target=copy, name="hand_over").start()
    return "handed over"


def append_line(path: str, line: str) -> str:
    """Append `line` to the file `path`: a side effect a test can count."""
    with open(path, "a", encoding="utf-8") as file:
        file.write(line + "\n")
    return f"appended {line!r}"


async def interrupt_me(signal_name: str = "SIGINT") -> str:
    """Send this very process `signal_name` (Ctrl-C's SIGINT, say), then wait to be cancelled:
    a run interrupted while this call runs, at a point the test chose."""
    os.kill(os.getpid(), signal.Signals[signal_name])
    await anyio.Event().wait()
    return "not reached"


def noisy(x: int = 1) -> str:
    """Write to stdout every way a tool can: `print()`, file descriptor 1, a program it
    starts, and C's stdio (block-buffered when fd 1 is no terminal)."""
    print(f"printed {x}")
    os.write(1, b"written to fd 1\n")
    subprocess.run([sys.executable, "-c", "print('a child printed')"], check=True)
    ctypes.CDLL(None).puts(b"C's puts said")
    return f"quiet {x}"
