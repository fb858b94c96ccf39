"""Whole lines for a terminal a run console draws on (`console.RunConsole`): what trace
printers and log handlers write reaches it a line at a time, so that each line is written
clear of its status line and of a streamed answer's open line."""

from __future__ import annotations

import io
import logging
from collections.abc import Collection, Generator
from contextlib import contextmanager
from typing import IO, Protocol, TextIO, cast

__all__ = ["LineWriter", "WholeLines", "logs_through"]


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


@contextmanager
def logs_through(console: LineWriter, files: Collection[IO[str]]) -> Generator[None]:
    """While open, the root logger's handlers that write to one of `files` (`basicConfig`'s
    on stderr) write through `console`: a log record neither lands on the status line nor
    splits a streamed answer."""
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
    try:
        yield
    finally:
        for handler, stream in moved:
            handler.setStream(stream)
