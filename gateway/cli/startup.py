"""What a process of our own puts right before a command runs, whatever it was started with.

- A closed stdin, stdout or stderr (`<&-`, `>&-`, `2>&-`) is opened on /dev/null. Left
  closed, the next file opened takes its number: uvloop's libuv aborts the process when it
  closes one of its own on 0-2 (exit 134), and a stdio MCP server started then finds a pipe
  where its stdin, stdout or stderr should be (it fails to start; an agent answers without
  its tools).
- stdout and stderr in an encoding that cannot write every character (a Latin-1 locale,
  `PYTHONIOENCODING=ascii`) write such a character as an escape (`\\u2014`) instead of
  failing the command after its run succeeded.
- The command line in an ASCII locale without Python's UTF-8 mode (`LC_ALL=C
  PYTHONUTF8=0`): Python hands a non-ASCII argument over as escaped bytes, which no run can
  store. Its text (the terminal's UTF-8) is not a file name there either (the locale's file
  names are ASCII), so the process starts again in UTF-8 mode, where both are right (as
  Python itself does in that locale unless told not to). An argument that is no UTF-8 text
  at all is refused.
- Ctrl-\\ (SIGQUIT) still quits at once (and dumps core where that is on), as it should, but
  first shows the terminal's cursor again: a live status line hides it while drawn, and the
  terminal would keep it hidden after the process. (Handled as SIGTERM is, the command
  would unwind for seconds: that is what Ctrl-C is for.)
"""

from __future__ import annotations

import io
import os
import re
import signal
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from types import FrameType

from toolkits.printable import encodes_all, printable

from ..errors import GatewayError

__all__ = ["command_line_text", "own_process_ready"]

_SURROGATES = re.compile("[\udc80-\udcff]")
"""How Python's file-system decoding keeps a byte it could not decode (`surrogateescape`)."""

_TERMINAL_SANE = b"\x1b[0m\x1b[?25h"
"""Colours and styles off (a status line cut mid-draw) and the cursor shown again."""


def own_process_ready(argv: Sequence[str]) -> list[str]:
    """Set this process up to run a command (see the module's docstring) and return `argv`
    (`sys.argv[1:]`) as text; may start the process again (`os.execv`) in UTF-8 mode.
    Raises `GatewayError` (bad input) for an argument that is not text."""
    reopen_closed_stdio()
    escaping_output()
    args = command_line_text(argv)
    if list(argv) != args and not _file_names_hold(args):
        _again_in_utf8_mode()  # returns only if it cannot
    _terminal_sane_on_quit()
    return args


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


def escaping_output() -> None:
    """`sys.stdout` and `sys.stderr` write what their encoding cannot as escapes (`\\xe9`,
    `\\u2014`) rather than raise `UnicodeEncodeError`."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper) and not encodes_all(stream):
            stream.reconfigure(errors="backslashreplace")


def command_line_text(argv: Sequence[str]) -> list[str]:
    """`argv` with each argument that came as escaped bytes (`LC_ALL=C` without UTF-8 mode:
    `héllo` as `h\\udcc3\\udca9llo`) decoded as the UTF-8 it is. Raises `GatewayError` for
    bytes that are no UTF-8 text."""
    args: list[str] = []
    for arg in argv:
        if _SURROGATES.search(arg) is None:
            args.append(arg)
            continue
        raw = os.fsencode(arg)
        try:
            args.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            shown = printable(raw.decode("utf-8", errors="backslashreplace"))
            raise GatewayError(
                f"the argument '{shown}' is not valid text in this locale: its bytes are not "
                "UTF-8 (give it as UTF-8; rename a file whose name is not)"
            ) from None
    return args


def _file_names_hold(args: Sequence[str]) -> bool:
    """Whether every argument can also name a file in this locale."""
    try:
        for arg in args:
            os.fsencode(arg)
    except UnicodeEncodeError:
        return False
    return True


def _again_in_utf8_mode() -> None:
    """This command again, in a new process image in Python's UTF-8 mode; returns only if
    that cannot be done (nothing to start: an embedded interpreter)."""
    if sys.flags.utf8_mode or not sys.executable or len(sys.orig_argv) < 2:
        return
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    with suppress(OSError):
        os.execv(sys.executable, [sys.executable, "-X", "utf8", *sys.orig_argv[1:]])


def _terminal_sane_on_quit() -> None:
    """On SIGQUIT, the cursor shown on the terminal, then the signal's default action."""
    on_terminal = any(_is_terminal(fd) for fd in (1, 2))
    if not on_terminal or signal.getsignal(signal.SIGQUIT) is not signal.SIG_DFL:
        return  # no terminal to put right; or the signal is ignored (nohup), not ours
    if threading.current_thread() is not threading.main_thread():
        return  # only the main thread may set a handler
    signal.signal(signal.SIGQUIT, _quit_with_terminal_sane)


def _quit_with_terminal_sane(signum: int, frame: FrameType | None) -> None:
    for fd in (2, 1):
        if _is_terminal(fd):
            with suppress(OSError):
                os.write(fd, _TERMINAL_SANE)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGQUIT)


def _is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False
