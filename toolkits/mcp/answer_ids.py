"""Answers over stdio whose id no request of ours has: said, not dropped without a word.

The SDK's session drops an answer it has no request for (at DEBUG, on its own logger), so a
server that answers with the wrong id leaves the call to wait out its timeout, and nobody
knows why. `AskedIds` keeps the ids of the latest requests written on a connection (the
session's and the passed-through calls'), and warns of an answer whose id is none of them:
the first few, then at DEBUG, as a server that always does it would flood the log.
"""

from __future__ import annotations

import logging
from collections import OrderedDict

from mcp.shared.dispatcher import coerce_request_id
from mcp_types import RequestId

from .few_warnings import FewWarnings

__all__ = ["AskedIds"]


class AskedIds:
    """The ids of the latest `KEPT` requests written to one server (a late answer, to a call
    that timed out, is to one of them)."""

    KEPT = 4096
    SAID = FewWarnings.SAID

    def __init__(self, log: logging.Logger) -> None:
        self._ids: OrderedDict[RequestId, None] = OrderedDict()
        self._strays = FewWarnings(log, "answers")

    def asked(self, request_id: RequestId) -> None:
        self._ids[coerce_request_id(request_id)] = None  # "7" is 7, as the SDK correlates
        if len(self._ids) > self.KEPT:
            self._ids.popitem(last=False)

    def answered(self, request_id: RequestId | None) -> None:
        """Note an answer with `request_id` (None: an error about a request the server could
        not read, which names none)."""
        if request_id is None or coerce_request_id(request_id) in self._ids:
            return
        self._strays.warn(
            "the server answered with id %.100r, which no request has: dropped (a call it was "
            "meant to answer waits for its timeout)",
            request_id,
        )
