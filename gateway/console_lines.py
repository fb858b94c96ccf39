"""Whole lines for a terminal a run console draws on (`console.RunConsole`): what trace
printers and log handlers write reaches it a line at a time, so that each line is written
clear of its status line and of a streamed answer's open line."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Collection, Generator
from contextlib import contextmanager
from typing import IO, Protocol, TextIO, cast

__all__ = ["LineWriter", "ThroughConsole", "WholeLines", "logs_through"]

_open: dict[int, LineWriter] = {}
"""The consoles `logs_through` has open, by the file (its `id`) each draws on."""


class LineWriter(Protocol):
    """What writes whole lines around a terminal's status (a `RunConsole`)."""

    def write_line(self, target: IO[str], line: str) -> None: ...

    def stream(self, target: TextIO) -> TextIO: ...


class WholeLines(io.TextIOBase):
    """Collects text into lines and hands each whole line to the console."""

    def __init__(self, console: LineWriter, target: TextIO) -> None:
        self._console = console
        self._target = target
        self._buffer = ""

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition("\n")
            self._console.write_line(self._target, line + "\n")
        return len(text)

    def flush(self) -> None:
        self._target.flush()


class ThroughConsole(io.TextIOBase):
    """`target` for a writer made before any console opened, in a thread of its own (the
    span exporter's, which writes a batch every few seconds): while a console draws on
    `target` (`logs_through`), each write's whole lines go through it as one block (a span's
    JSON stays together), else straight to `target`."""

    def __init__(self, target: TextIO) -> None:
        self._target = target
        self._buffer = ""
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        console = _open.get(id(self._target))
        if console is None and not self._buffer:
            return self._target.write(text)
        with self._lock:
            whole, end, self._buffer = (self._buffer + text).rpartition("\n")
            if not end:  # no line ends yet: it waits
                self._buffer = whole + self._buffer
                return len(text)
            if console is None:
                self._target.write(whole + end)
            else:
                console.write_line(self._target, whole + end)
        return len(text)

    def flush(self) -> None:
        self._target.flush()


@contextmanager
def logs_through(console: LineWriter, files: Collection[IO[str]]) -> Generator[None]:
    """While open, the root logger's handlers that write to one of `files` (`basicConfig`'s
    on stderr), and each `ThroughConsole` on one, write through `console`: a log record (a
    span's JSON) neither lands on the status line nor splits a streamed answer."""
    moved: list[tuple[logging.StreamHandler[IO[str]], IO[str]]] = []
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.StreamHandler) or isinstance(
            handler, logging.FileHandler
        ):
            continue
        writer = cast(logging.StreamHandler[IO[str]], handler)
        stream = writer.stream
        if any(stream is file for file in files):
            writer.setStream(console.stream(cast(TextIO, stream)))
            moved.append((writer, stream))
    before = {id(file): _open.get(id(file)) for file in files}
    _open.update(dict.fromkeys(before, console))
    try:
        yield
    finally:
        for handler, stream in moved:
            handler.setStream(stream)
        for file, previous in before.items():
            if previous is None:
                _open.pop(file, None)
            else:
                _open[file] = previous
