"""Who hears that one of a node's lists (tools, prompts, resources) changed."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..capabilities import ListChangedCallback

__all__ = ["Listeners"]


class Listeners:
    """The callbacks of one list of one node; a failing one is logged, never raised."""

    def __init__(self, node: str, what: str, log: logging.Logger) -> None:
        self._node = node
        self._what = what
        self._log = log
        self._callbacks: list[ListChangedCallback] = []

    def add(self, callback: ListChangedCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return unsubscribe

    async def notify(self) -> None:
        for callback in list(self._callbacks):
            try:
                await callback(self._node)
            except Exception:
                self._log.exception("a %s-changed listener failed", self._what)
