"""A logger's lines, as it says them: a test waits for one by its text, with no sleep."""

from __future__ import annotations

import logging
from collections.abc import Generator
from contextlib import contextmanager

import anyio


class Said(logging.Handler):
    """What a logger said (on the event loop), to wait on."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self._changed = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, text: str, *, within: float = 20) -> None:
        with anyio.fail_after(within):
            while not any(text in line for line in self.lines):
                await self._changed.wait()


@contextmanager
def listening(logger_name: str, level: int = logging.NOTSET) -> Generator[Said]:
    """`Said` of the logger `logger_name` for the block (at `level`, when given)."""
    handler, logger = Said(), logging.getLogger(logger_name)
    was = logger.level
    logger.addHandler(handler)
    if level:
        logger.setLevel(level)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(was)
