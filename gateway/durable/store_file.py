"""A SQLite run store's file deleted (or replaced) while this process runs on it.

SQLite goes on with the file it has open, which no other process finds any more: a decision
sent to a run waiting for approval never reaches it (`runs approve` finds no store), and
whatever the run records is lost with the file. `watched` looks at the file every
`LOOK_SECONDS` (one stat); once it is gone, the runs executing here stop with `StoreGone`,
which says so, and nothing promises a resume that cannot work.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator, Callable
from contextlib import asynccontextmanager

import anyio

from toolkits import in_background

from ..errors import StoreGone, StoreUnavailable

__all__ = ["LOOK_SECONDS", "StoreFile", "watched"]

LOOK_SECONDS = 2.0
"""How often the store's file is looked at."""


class StoreFile:
    """The file of the SQLite store at `url`, as this process opened it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = url.removeprefix("sqlite:///")
        self._opened = _identity(self.path)

    def gone(self) -> StoreGone | None:
        """Why the runs here can no longer be kept, if the file was deleted or replaced."""
        if self._opened is None or _identity(self.path) == self._opened:
            return None
        return StoreGone(
            f"the run store {self.url} was deleted (or replaced) while the run executed: "
            "what it recorded went with it, so it cannot be resumed; start it again"
        )


@asynccontextmanager
async def watched(
    file: StoreFile, stop: Callable[[StoreUnavailable], None]
) -> AsyncGenerator[None]:
    """While the block runs, `stop(error)` stops the runs executing here (also those begun
    later) once `file` is gone."""

    async def watch() -> None:
        while True:
            await anyio.sleep(LOOK_SECONDS)
            error = await anyio.to_thread.run_sync(file.gone)
            if error is not None:
                stop(error)

    async with in_background(watch, wait_started=False):
        yield


def _identity(path: str) -> tuple[int, int] | None:
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino
