"""Every page of a paginated MCP listing (tools, resources, templates, prompts)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

__all__ = ["MAX_LIST_PAGES", "every_page"]

MAX_LIST_PAGES = 1_000
"""A server whose cursors never end is listed this far, with a warning (one that repeats a
cursor, no further than that)."""

_CURSOR_SAID = 80

_Item = TypeVar("_Item")

Page = Callable[[str | None], Awaitable[tuple[Sequence[_Item], str | None]]]
"""Fetches the page at a cursor (None: the first): its items and the next cursor."""


async def every_page(page: Page[_Item], *, what: str, log: logging.Logger) -> list[_Item]:
    """The items of every page, in order, up to `MAX_LIST_PAGES` pages, and up to a page
    whose next cursor was seen before (the server would list the same pages again)."""
    items: list[_Item] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_LIST_PAGES):
        found, cursor = await page(cursor)
        items.extend(found)
        if not cursor:
            return items
        if cursor in seen:
            said = cursor if len(cursor) <= _CURSOR_SAID else cursor[: _CURSOR_SAID - 3] + "..."
            log.warning(
                "stopped listing %s: the server repeated cursor %r, which would list the same "
                "pages again",
                what,
                said,
            )
            return items
        seen.add(cursor)
    log.warning("stopped listing %s after %d pages", what, MAX_LIST_PAGES)
    return items
