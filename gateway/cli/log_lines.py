"""How the command line's log lines look, and which of them `-v` shows.

`-v` logs at INFO, `-vv` at DEBUG. `serve` runs for days with its stderr in a file or a pipe
that adds no time of its own (`2> gw.log`): each of its lines starts with the time, ISO-8601 in
UTC (`2026-07-28T09:14:03.512Z WARNING toolkits.mcp.web: connection lost: ...`), and at `-v`
it leaves out the lines said for every HTTP request (httpx, httpx2) and every 2025-era session
(the mcp SDK's), ~90 % of a busy gateway's log: `-vv` shows them. The other commands' lines
stay as they were (`WARNING toolkits.mcp.web: ...`): a run is read as it happens.
"""

from __future__ import annotations

import logging
import sys
import time

from toolkits.mcp.log_secrets import Unsaid

__all__ = ["setup_logging", "timed"]

_FORMAT = "%(levelname)s %(name)s: %(message)s"
_PER_REQUEST = (
    "httpx",
    "httpx2",
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
)
"""Loggers that say a line for every request or session served or sent (at INFO)."""


def timed(line: str) -> str:
    """`line` as `serve` writes it: after the time."""
    return f"{_timestamp(time.time())} {line}"


def setup_logging(verbosity: int, *, serving: bool) -> None:
    """Log to stderr: at WARNING, INFO (`verbosity` 1) or DEBUG (2 and more); `serving`: as
    `serve` does (times, and no per-request lines below DEBUG). A no-op where the root logger
    has a handler already (an embedding program's, pytest's)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Timed(_FORMAT) if serving else logging.Formatter(_FORMAT))
    handler.addFilter(Unsaid())  # an MCP server's URL secrets, in any logger's line
    if serving and verbosity < 2:
        handler.addFilter(_per_request_said)
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, handlers=[handler])


def _per_request_said(record: logging.LogRecord) -> bool:
    """Let through all but the per-request and per-session lines below WARNING."""
    if record.levelno >= logging.WARNING:
        return True
    name = record.name
    return not any(name == chatty or name.startswith(f"{chatty}.") for chatty in _PER_REQUEST)


class _Timed(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{_timestamp(record.created)} {super().format(record)}"


def _timestamp(when: float) -> str:
    milliseconds = int(when % 1 * 1000)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(when))}.{milliseconds:03d}Z"
