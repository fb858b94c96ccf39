"""One process at a time decides about a server's stored tokens: an exclusive lock on a file.

Every `agent-gateway` process of a user (a `serve`, a `call`, an `auth login`) reads and
writes the same token store entry. An authorization server that rotates refresh tokens (OAuth
2.1 asks it of public clients) makes a refresh a read-decide-write: the refresh token read is
spent once sent. `held(path)` is the lock that makes it one step across processes: an
advisory lock (`flock`; `msvcrt.locking` on Windows) on a file beside the entry, taken without
blocking the event loop and given up when the holder's task leaves, or its process dies.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.to_thread

__all__ = ["StoreLocked", "held"]

_POLL_SECONDS = 0.02


class StoreLocked(TimeoutError):
    """Another process held the token store's lock for longer than we wait."""


@asynccontextmanager
async def held(path: Path, *, within: float) -> AsyncGenerator[None]:
    """Hold the exclusive lock on `path` (made 0600 if missing) for the block.

    Raises `StoreLocked` when another holder keeps it past `within` seconds.
    """
    fd = await anyio.to_thread.run_sync(_open, path)
    try:
        try:
            with anyio.fail_after(within):
                # Polled (a non-blocking try) rather than a blocking call in a thread: a
                # cancelled wait must not leave a thread behind that takes the lock later.
                while True:
                    if _try_lock(fd):
                        break
                    await anyio.sleep(_POLL_SECONDS)
        except TimeoutError:
            raise StoreLocked(
                f"another agent-gateway process has held the OAuth token store's lock "
                f"({path}) for {within:g} s"
            ) from None
        try:
            yield
        finally:
            _unlock(fd)
    finally:
        os.close(fd)


def _open(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT, 0o600)


if sys.platform == "win32":
    import msvcrt

    def _try_lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        os.lseek(fd, 0, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
