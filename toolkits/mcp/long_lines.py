"""Lines on a stdio server's stdout that are not messages to read: not JSON-RPC, or longer than
`max_message_bytes` (dropped unread, and whose answer it was).

A long line is not kept (a server could send gigabytes), so it cannot be parsed; but the
request it answers is named at one of its ends in the shapes the SDKs write: the Python
SDK's `{"jsonrpc": "2.0", "id": 7, "result": ...}`, the TypeScript SDK's
`{"result": ..., "jsonrpc": "2.0", "id": 7}` (a request of the server's, or a notification,
is no answer: `"method"` comes where `"result"` would). `OverLong` keeps the line's first and last few
hundred bytes and its size, and reads the id from them, so that the call it answers fails at
once rather than by its timeout. An id found only deeper in the line is not
looked for: that call still fails by its timeout, as the warning says.

OverLong()            -> feed it the line's pieces (`add`), then ask `answers()` and `size`
too_long_error(...)   -> the JSON-RPC error the session is handed for that request
StrayLines(log, limit) -> says such lines, the first few
too_long_answer(e)    -> the answer's size if an `ErrorData` is that error (the node says it
                         as `call_failures.too_large` does an event or body over the limit)
"""

from __future__ import annotations

import json
import logging
import re

import mcp_types

from .few_warnings import FewWarnings

__all__ = ["OverLong", "StrayLines", "too_long_answer", "too_long_error"]

_ENDS = 512
"""Bytes kept of each end of the line: an id and the `"jsonrpc"` member beside it fit."""
_ID = rb'(-?[0-9]+|"(?:[^"\\]|\\.)*")'
_VERSION = rb'"jsonrpc"\s*:\s*"2\.0"'
_ANSWER = rb'"(?:result|error)"\s*:'
_HEAD = re.compile(
    rb"\s*\{\s*(?:" + _VERSION + rb"\s*,\s*)?\"id\"\s*:\s*" + _ID + rb"\s*,\s*" + _ANSWER
)
_ANSWER_FIRST = re.compile(rb"\s*\{\s*" + _ANSWER)
_TAIL = re.compile(
    rb"[,{]\s*(?:"
    + _VERSION
    + rb"\s*,\s*)?\"id\"\s*:\s*"
    + _ID
    + rb"\s*(?:,\s*"
    + _VERSION
    + rb"\s*)?\}\s*\Z"
)
_MARK = "an answer larger than the "
"""How the session's error for such an answer begins (`too_long_answer`), as the node says
it (`call_failures.too_large`)."""


class OverLong:
    """What is kept of a line too long to keep: its ends and its size."""

    __slots__ = ("_head", "_tail", "size")

    def __init__(self) -> None:
        self._head = b""
        self._tail = b""
        self.size = 0

    def add(self, piece: bytes) -> None:
        if len(self._head) < _ENDS:
            self._head += piece[: _ENDS - len(self._head)]
        self._tail = (self._tail + piece[-_ENDS:])[-_ENDS:]
        self.size += len(piece)

    def answers(self) -> str | int | None:
        """The id of the request the line answers, read at either end; None when neither end
        names one (a notification, a request of the server's, or an id deeper in)."""
        found = _HEAD.match(self._head)
        if found is None and _ANSWER_FIRST.match(self._head):  # the id comes last
            found = _TAIL.search(self._tail)
        if found is None:
            return None
        try:
            key = json.loads(found[1])
        except ValueError:
            return None
        return key if isinstance(key, str | int) else None


def too_long_error(key: str | int, size: int, limit: int) -> mcp_types.JSONRPCError:
    """The error answer the session is handed for the request `key`, whose answer was cut."""
    message = f"{_MARK}{limit} byte limit ({size} bytes)"
    said = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message, data={"size": size})
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=key, error=said)


def too_long_answer(error: mcp_types.ErrorData) -> int | None:
    """The size of the answer, when `error` is what the session was handed for one over the
    limit (`too_long_error`); None for any other error."""
    if error.code != mcp_types.INTERNAL_ERROR or not error.message.startswith(_MARK):
        return None
    data: object = error.data
    size = data.get("size") if isinstance(data, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return size if isinstance(size, int) else None


class StrayLines:
    """Lines on stdout that are not JSON-RPC (a server printing its own log there): said in
    one line each, the first few; a chatty server must not flood the gateway's log."""

    def __init__(self, node_log: logging.Logger, max_line_bytes: int) -> None:
        self._log = node_log
        self._strays = FewWarnings(node_log, "lines")
        self._max_line_bytes = max_line_bytes

    def too_long(self, size: int, *, answers: bool) -> None:
        self._log.warning(
            "the server wrote a line on stdout of %d bytes, longer than its max_message_bytes "
            "(%d bytes): dropped unread (%s)",
            size,
            self._max_line_bytes,
            "the call it answers fails"
            if answers
            else "no answer it names: a call it answers fails by its timeout",
        )

    def note(self, line: bytes) -> None:
        self._strays.warn(
            "the server wrote a line on stdout that is not JSON-RPC, ignored (servers log to "
            "stderr): %.200r",
            line.decode("utf-8", "replace"),
        )
