"""The stores whose drivers run on asyncio only: redis-py's and psycopg's async clients."""

from __future__ import annotations

import asyncio

from ..errors import MemoryStoreError
from ..url_credentials import redacted

__all__ = ["check_asyncio"]


def check_asyncio(what: str, url: str) -> None:
    """Raises `MemoryStoreError` unless called from an asyncio event loop. Under another
    (trio), the driver fails with errors of its own that name no cause ("no running event
    loop", trio's "unrecognized yield message"), and a client it opened cannot be closed."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        raise MemoryStoreError(
            f"chat memory {redacted(url)}: {what} memory runs on asyncio only (its driver "
            "does): under another event loop (trio), keep chat memory in SQLite or memory://"
        ) from None
