"""`serve` gives the memory of big results back to the system once it is quiet.

glibc raises its mmap threshold to the biggest block freed so far (up to 32 MB), so after a
first big result the next ones come from its heap, and the heap's free pages stay in the
process's RSS for good (a soak: 139 -> 160 MB idle). Keeping the threshold low instead makes
every big block an mmap/munmap: 4x the CPU of a 1 MB call passed through. `malloc_trim(0)`
hands the free pages back (from the middle of the heap too) at no cost per call; `serve` calls
it in a worker thread once calls have stopped for `QUIET` seconds, at most every `EVERY`.

Only on glibc (`trimmer` is None elsewhere: musl and macOS give big blocks back themselves).
"""

from __future__ import annotations

import ctypes
from collections.abc import Awaitable, Callable

import anyio
import anyio.to_thread

__all__ = ["EVERY", "QUIET", "TICK", "give_back_memory", "trimmer"]

TICK = 0.5
"""Seconds between looks at the calls in flight: the look costs the calls nothing."""
QUIET = 2.0
"""Seconds without a call in flight after some before the memory is given back: a client's
next call usually comes sooner, and would only take the pages again."""
EVERY = 10.0
"""At least this many seconds between trims: a trim walks the whole heap (a few ms for
100 MB, holding malloc's lock), so a gateway quiet for 2 s every 3 s does not pay it each
time."""


def trimmer() -> Callable[[], object] | None:
    """glibc's `malloc_trim(0)`, or None when the C library is not glibc."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018  (glibc's alone: musl has malloc_trim too)
        trim = libc.malloc_trim
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return lambda: trim(0)


async def give_back_memory(
    in_flight: Callable[[], int],
    trim: Callable[[], object],
    *,
    clock: Callable[[], float] = anyio.current_time,
    tick: Callable[[], Awaitable[object]] = lambda: anyio.sleep(TICK),
) -> None:
    """Forever: once `in_flight()` was above 0 at a `tick` and has been 0 for `QUIET`
    seconds of `clock`, and `EVERY` seconds have passed since the last trim, call `trim` in
    a worker thread (it takes a while on a big heap: the loop goes on meanwhile).

    Sampling, not counting, keeps the calls' path as it is; a burst of calls that all begin
    and end between two ticks goes unseen (its memory goes back after the next call seen)."""
    active = False
    last_busy = last_trim = float("-inf")
    while True:
        await tick()
        now = clock()
        if in_flight():
            active, last_busy = True, now
        elif active and now - last_busy >= QUIET and now - last_trim >= EVERY:
            await anyio.to_thread.run_sync(trim)
            active, last_trim = False, clock()
