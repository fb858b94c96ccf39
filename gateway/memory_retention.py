"""Chat memory sessions not used for `keep_days` (the memory's config) are deleted: when a
gateway opens (`run`, `chat`, `serve`), then every hour while it stays open. Only whole
sessions go, by the time their newest turn was saved. `sessions prune` does it on demand, and
gives a SQLite file's freed space back."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import AsyncGenerator, Hashable, Sequence
from contextlib import asynccontextmanager

import anyio

from agent import MemoryStoreError
from agent.memory import SessionStore, SQLiteStore, store_key
from toolkits import in_background

__all__ = ["EVERY_SECONDS", "prune_sessions", "pruning_sessions"]

_log = logging.getLogger(__name__)

EVERY_SECONDS = 3600.0
DAY_SECONDS = 86_400.0


@asynccontextmanager
async def pruning_sessions(
    stores: Sequence[tuple[SessionStore, float]], *, every: float = EVERY_SECONDS
) -> AsyncGenerator[None]:
    """While the block runs, delete each store's sessions not used for its days (0: kept
    for ever): at once (before the block), then every `every` seconds. Stores of the same
    data (`store_key`: one Redis by its Unix socket and by TCP) keep sessions as long as
    the longest of their days. Failures are logged, not raised: the next round deletes
    them."""
    if all(not days for _, days in stores):
        yield
        return

    async def prune_all() -> None:
        try:
            pruned = await _longest(stores)
        except MemoryStoreError as exc:
            # Which stores are one is not known: deleting by the shorter days could take
            # sessions another agent keeps longer.
            _log.warning("deleting unused sessions waits for the next round: %s", exc)
            return
        for store, days in pruned:
            try:
                await prune_sessions(store, days)
            except MemoryStoreError as exc:
                _log.warning("deleting the sessions unused for %s days failed: %s", days, exc)

    async def hourly() -> None:
        while True:
            await anyio.sleep(every)
            await prune_all()

    await prune_all()
    async with in_background(hourly, wait_started=False):
        yield


async def _longest(
    stores: Sequence[tuple[SessionStore, float]],
) -> list[tuple[SessionStore, float]]:
    """For each store's data, its first store and the longest of their days; none of what
    is kept for ever. Raises `MemoryStoreError` when a server does not say which it is."""
    longest: dict[Hashable, tuple[SessionStore, float]] = {}
    for store, days in stores:
        wanted = days or math.inf
        data = await store_key(store)
        first, known = longest.get(data, (store, wanted))
        longest[data] = (first, max(known, wanted))
    return [(store, days) for store, days in longest.values() if days != math.inf]


async def prune_sessions(store: SessionStore, days: float) -> int:
    """Delete the sessions of `store` not saved to for `days`; how many. A SQLite file not
    made yet is left unmade. Raises `MemoryStoreError`."""
    if isinstance(store, SQLiteStore) and not await anyio.Path(store.path).exists():
        return 0
    pruned = await store.prune(time.time() - days * DAY_SECONDS)
    if pruned:
        _log.info("deleted %d chat memory sessions unused for %s days (%r)", pruned, days, store)
    return pruned
