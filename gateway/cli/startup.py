"""What a process of our own puts right before a command runs, whatever it was started with.

- A closed stdin, stdout or stderr (`<&-`, `>&-`, `2>&-`) is opened on /dev/null. Left
  closed, the next file opened takes its number: uvloop's libuv aborts the process when it
  closes one of its own on 0-2 (exit 134), and a stdio MCP server started then finds a pipe
  where its stdin, stdout or stderr should be (it fails to start; an agent answers without
  its tools).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["own_process_ready", "reopen_closed_stdio"]


def own_process_ready(argv: Sequence[str]) -> list[str]:
    """Set this process up to run a command (see the module's docstring); `argv`
    (`sys.argv[1:]`) as the command takes it."""
    reopen_closed_stdio()
    return list(argv)


def reopen_closed_stdio() -> None:
    """File descriptors 0, 1 and 2 open, each closed one on /dev/null (0 for reading), and
    `sys.stdin`, `sys.stdout` and `sys.stderr` streams on them (Python left them None)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            devnull = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            if devnull != fd:  # the lowest free number: `fd` itself, as 0 to fd - 1 are open
                os.dup2(devnull, fd)
                os.close(devnull)
    if sys.stdin is None:
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 (the process's, for its life)
    if sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")  # noqa: SIM115
