"""`serve` gives freed heap memory back to the system once its calls have stopped
(`gateway.cli.give_back_memory`)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import anyio
import pytest

from gateway.cli.give_back_memory import EVERY, QUIET, give_back_memory, trimmer

pytestmark = pytest.mark.anyio

# A fresh interpreter, so that no earlier test's heap is in the figures. glibc's mmap threshold
# is raised to 16 MB by freeing one such block (at most 32 MB is); then 200 blocks of 1 MB come from the heap, and
# freeing all but every 10th leaves 180 MB of free pages that the kept blocks pin (no block at
# the heap's top to shrink it by). RSS in MB before and after the trim.
_FRAGMENTED = """
import ctypes, mmap
from gateway.cli.give_back_memory import trimmer
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
def rss():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * mmap.PAGESIZE / 2**20
libc.free(libc.malloc(16 << 20))
blocks = [libc.malloc(1 << 20) for _ in range(200)]
for block in blocks:
    ctypes.memset(block, 1, 1 << 20)
for i, block in enumerate(blocks):
    if i % 10:
        libc.free(block)
before = rss()
trimmer()()
print(before, rss())
"""


@pytest.mark.skipif(trimmer() is None, reason="the C library is not glibc")
def test_trimming_gives_a_fragmented_heaps_free_pages_back() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _FRAGMENTED], capture_output=True, text=True, timeout=30, check=True
    )
    before, after = map(float, done.stdout.split())
    assert before - after > 100, (before, after)  # 180 MB freed; 20 MB stay in use


@dataclass
class _Sampled:
    now: float = 0.0
    calls: int = 0


async def test_memory_is_given_back_once_after_calls_stop_for_the_quiet_period() -> None:
    sampled = _Sampled()
    trims: list[float] = []
    ticks_in, ticks = anyio.create_memory_object_stream[tuple[float, int]]()
    looked, looks = anyio.create_memory_object_stream[None]()

    async def tick() -> None:
        await looked.send(None)  # the previous tick's look (and trim) is done
        sampled.now, sampled.calls = await ticks.receive()

    async def at(now: float, calls: int) -> None:
        await ticks_in.send((now, calls))
        await looks.receive()

    with anyio.fail_after(10), ticks_in, ticks, looked, looks:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(
                lambda: give_back_memory(
                    lambda: sampled.calls,
                    lambda: trims.append(sampled.now),
                    clock=lambda: sampled.now,
                    tick=tick,
                )
            )
            await looks.receive()
            await at(1.0, 0)
            await at(50.0, 0)
            assert trims == []  # quiet from the start: nothing was used
            await at(100.0, 2)
            await at(100.0 + QUIET / 2, 0)
            await at(100.0 + QUIET - 0.1, 0)
            assert trims == []  # not quiet long enough yet
            await at(100.0 + QUIET, 0)
            assert trims == [100.0 + QUIET]
            first = 100.0 + QUIET
            await at(first + 0.5, 0)
            assert len(trims) == 1  # once per quiet period
            await at(first + 1, 1)
            await at(first + 1 + QUIET, 0)
            assert len(trims) == 1  # the last trim was less than EVERY ago
            await at(first + EVERY, 0)
            assert trims[1:] == [first + EVERY]
            await at(first + EVERY + 100, 0)
            assert len(trims) == 2
            tasks.cancel_scope.cancel()
