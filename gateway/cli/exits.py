"""Exit codes, and which error means which: what the shell learns from a command.

0    success
1    the run failed: a model error, max iterations (of any item of `run --items`), a server
     that was needed and is down, chat memory's store or the run store unreachable (or not
     writable now: locked, full, read-only, found damaged), the run cancelled (`runs cancel`)
2    bad input: config, arguments, an unknown agent, tool or stored run, an optional
     driver or SDK not installed (`pip install 'agent-gateway[redis]'`)
3    `run --no-wait` (or `resume --no-wait`): a call waits for a person's approval; the run
     is stored, waiting: `runs approve|deny`, then `resume`
130  interrupted (Ctrl-C); 143 for SIGTERM, 129 for SIGHUP
"""

from __future__ import annotations

import sys

from agent.errors import AgentError, MemoryDriverMissing, MemoryStoreError, ModelError
from toolkits.errors import ServerUnavailable, ToolkitError, ToolTimeout
from toolkits.printable import printable

from ..errors import DepthExceeded, GatewayError, RunCancelled, StoreUnavailable

__all__ = [
    "BAD_INPUT",
    "FAILED",
    "INTERRUPTED",
    "OK",
    "WAITING_APPROVAL",
    "RunFailed",
    "exit_code",
    "report",
]

OK = 0
FAILED = 1
BAD_INPUT = 2
WAITING_APPROVAL = 3
INTERRUPTED = 130


class RunFailed(GatewayError):
    """The command ran and failed (exit 1), e.g. `--strict` with a server down."""


def exit_code(exc: GatewayError | AgentError | ToolkitError) -> int:
    """1 for what failed while running, 2 for what was wrong before anything ran."""
    failed = (
        RunFailed,
        RunCancelled,
        ModelError,
        MemoryStoreError,
        StoreUnavailable,
        DepthExceeded,
        ServerUnavailable,
        ToolTimeout,
    )
    if isinstance(exc, MemoryDriverMissing):  # an extra to install, as --otel's SDK
        return BAD_INPUT
    return FAILED if isinstance(exc, failed) else BAD_INPUT


def report(exc: BaseException) -> None:
    """`error: ...` on stderr, with the notes added on the way up (how to resume, ...)."""
    # An error may quote a server, a model or a caller: its escapes are shown, not obeyed.
    print(printable(f"error: {exc}"), file=sys.stderr)
    for note in getattr(exc, "__notes__", ()):
        print(printable(note), file=sys.stderr)
