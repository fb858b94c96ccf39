"""Stdout for the command's result alone.

While a command runs, code that is not the command's may write to stdout: a local Python
tool's `print()` or a library it uses (through `sys.stdout`), a C extension or a program the
tool starts (straight to file descriptor 1). None of it may reach stdout, which a script
parses (`--json`) or takes as the answer. So, as `serve --stdio` keeps its protocol clean,
`stdout_for_results` points fd 1 at stderr for the command's length, and the command writes
its results on a private duplicate of it (`result_stdout()`). Meanwhile `sys.stdout` writes
to stderr too, each line said to be a tool's output (`tool output: ...`), around a live status
line while one is shown (`printed_around`). What a program or a C extension writes to fd 1
reaches stderr as written.
"""

from __future__ import annotations

import ctypes
import io
import json
import os
import sys
import threading
from collections.abc import Generator
from contextlib import contextmanager, suppress
from typing import Any, TextIO

from toolkits.printable import encodes_all

from ..console import RunConsole

__all__ = ["TOOL_OUTPUT", "printed_around", "result_json", "result_stdout", "stdout_for_results"]

TOOL_OUTPUT = "tool output: "
"""What each line printed to `sys.stdout` during a command starts with on stderr."""

_STDOUT, _STDERR = 1, 2

_results: TextIO | None = None
_printed: _Printed | None = None


def result_stdout() -> TextIO:
    """Where the command writes its result (an answer, a JSON document, a listing): stdout,
    also while `stdout_for_results` keeps fd 1 and `sys.stdout` for what else is printed."""
    return _results if _results is not None else sys.stdout


def result_json(value: Any, **options: Any) -> str:
    """`value` as JSON for `result_stdout()`: its characters as they are where stdout's
    encoding writes them all (UTF-8), else as `\\u` escapes (ASCII, Latin-1), the same text
    to whatever reads the JSON. `options`: `json.dumps`'s."""
    return json.dumps(value, ensure_ascii=not encodes_all(result_stdout()), **options)


@contextmanager
def stdout_for_results() -> Generator[None]:
    """For the block, stdout carries what is written to `result_stdout()` alone (see the
    module's docstring); on exit, fd 1 and `sys.stdout` are as they were."""
    global _results, _printed
    original = sys.stdout
    aside = _duplicate(_STDOUT) if original is not None and _results is None else None
    if original is None or aside is None:  # no stdout (closed), or kept already
        yield
        return
    original.flush()
    results = _private_copy(original)
    os.dup2(_STDERR, _STDOUT)
    printed = _Printed(sys.stderr, original.encoding, original.errors)
    _results, _printed, sys.stdout = results or original, printed, printed
    try:
        yield
    finally:
        sys.stdout, _results, _printed = original, None, None
        printed.end()
        _flush_c_stdio()  # a C extension's buffered printf goes where fd 1 points now
        os.dup2(aside, _STDOUT)
        os.close(aside)
        if results is not None:
            _close(results)


def _duplicate(fd: int) -> int | None:
    """A duplicate of `fd`, to put it back later; None when it is closed."""
    try:
        return os.dup(fd)
    except OSError:
        return None


def _private_copy(stdout: TextIO) -> TextIO | None:
    """A text stream like `stdout` on a duplicate of fd 1, when `stdout` writes to fd 1;
    None when it writes elsewhere (a test's capture, say): it is the results' stream as is."""
    try:
        if stdout.fileno() != _STDOUT:
            return None
    except (OSError, ValueError):  # no file descriptor: io.UnsupportedOperation
        return None
    return open(
        os.dup(_STDOUT),
        "w",
        buffering=1 if stdout.line_buffering else -1,  # 1: by line, as on a terminal
        encoding=stdout.encoding,
        errors=stdout.errors,
    )


def _close(results: TextIO) -> None:
    """Flush and close the results' stream; a reader that went away (`| head`) raises
    `BrokenPipeError` as a write would, and what is left unwritten is dropped."""
    try:
        results.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, results.fileno())  # closing it flushes again: into nothing
        os.close(devnull)
        results.close()
        raise
    results.close()


def _flush_c_stdio() -> None:
    """Flush C's stdio buffers (`printf` of an extension, block-buffered when fd 1 is no
    terminal, else written at exit: after the result)."""
    with suppress(Exception):  # no C library to load (not POSIX)
        ctypes.CDLL(None).fflush(None)


@contextmanager
def printed_around(console: RunConsole) -> Generator[None]:
    """While the block runs, the lines printed to `sys.stdout` are written around `console`'s
    status line (and never split a streamed answer's line)."""
    printed = _printed
    if printed is None:
        yield
        return
    target = printed.target
    printed.target = console.stream(target)
    try:
        yield
    finally:
        printed.target = target


class _Printed(io.TextIOBase):
    """`sys.stdout` while the result keeps stdout: whole lines onto `target` (stderr), each
    said to be a tool's output. Tools print from worker threads too: one writer at a time."""

    def __init__(self, target: TextIO, encoding: str, errors: str | None) -> None:
        super().__init__()
        self.target = target
        self._encoding = encoding
        self._errors = errors or "strict"
        self._pending = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        return self._encoding

    @property
    def errors(self) -> str:  # pyright: ignore[reportIncompatibleVariableOverride]
        # With `encoding`, what `input()` needs to read a line with readline's editing
        # (`line_editing.py`), its prompt written to fd 1: stderr too.
        return self._errors

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False  # a tool that asks writes plain text: it is not shown as it wrote it

    def fileno(self) -> int:
        # A program a tool starts with `stdout=sys.stdout` writes to fd 1: stderr too.
        return _STDOUT

    def write(self, text: str) -> int:
        with self._lock:
            *lines, self._pending = (self._pending + text).split("\n")
            self._say(lines)
        return len(text)

    def flush(self) -> None:
        with suppress(OSError, ValueError):  # stderr gone: what a tool prints is not ours
            self.target.flush()

    def end(self) -> None:
        """Write the last line even if it never ended."""
        with self._lock:
            pending, self._pending = self._pending, ""
            self._say([pending] if pending else [])

    def _say(self, lines: list[str]) -> None:
        if not lines:
            return
        self.target.write("".join(f"{TOOL_OUTPUT}{line}\n" for line in lines))
        self.flush()
