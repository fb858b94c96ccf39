"""How many files this process may have open at once (its soft `RLIMIT_NOFILE`, `ulimit -n`),
raised before what needs them starts.

Each MCP server takes file descriptors: a stdio one its pipes and a pidfd watching for its
exit (4 once started, about 5 while all start at once: 100 servers started in a limit of 450,
before the pidfd), an HTTP one its connections; `serve
--http` holds one per client connection. Under macOS's default soft limit (256) 84 of 100
stdio servers failed with "Too many open files"; under the 1024 of many Linux hosts, 125 of
350. Go's
runtime raises the soft limit to the hard one as a program starts; here each need is reserved
before it starts (`reserved_files`), and the soft limit raised, up to the hard limit, to twice
what is reserved (calls open connections too). The limit is process-wide and never lowered
(files may be open above the old one); children inherit it. Where the hard limit (or the
system) allows less than is reserved, one warning says so, naming `ulimit -n`.

    with reserved_files(files_for_servers(100), "100 MCP servers starting at once"):
        ...  # start them
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Generator
from contextlib import contextmanager

__all__ = ["files_for_servers", "reserved_files"]

_BASE_FILES = 128
"""The process's own files beside what is reserved: stdio, stores, model connections, logs."""
_FILES_PER_SERVER = 6
"""A server's share while all start at once: a stdio server peaked at about 4 (measured), 5
with the pidfd its exit is watched by."""

log = logging.getLogger(__name__)


def files_for_servers(count: int) -> int:
    """The files `count` MCP servers starting at once may take."""
    return count * _FILES_PER_SERVER


class _Reserved:
    """What this process reserved files for, and the most it has warned of."""

    def __init__(self) -> None:
        self.needs: list[tuple[int, str]] = []
        self.warned = 0


_RESERVED = _Reserved()


@contextmanager
def reserved_files(files: int, what: str) -> Generator[None]:
    """Count `files` (for `what`, e.g. "100 MCP servers starting at once") in this process's
    need while open, the soft limit raised to cover it first (see the module's docstring)."""
    need = (files, what)
    _RESERVED.needs.append(need)
    try:
        _raise_limit()
        yield
    finally:
        _RESERVED.needs.remove(need)


def _raise_limit() -> None:
    if sys.platform == "win32":  # no such limit: a process's handles are bounded by memory
        return
    import resource  # (POSIX only)

    needed = _BASE_FILES + sum(files for files, _ in _RESERVED.needs)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return
    most = None if hard == resource.RLIM_INFINITY else hard
    # Twice the need if the system allows it (macOS refuses more than kern.maxfilesperproc,
    # even under an unlimited hard limit), else the need itself.
    for wanted in (2 * needed, needed):
        target = wanted if most is None else min(wanted, most)
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        soft = target
        break
    if soft >= needed or needed <= _RESERVED.warned:  # said already, of as much or more
        return
    _RESERVED.warned = needed
    reasons = " and ".join(what for files, what in _RESERVED.needs if files)
    above_hard = (
        f"; its hard limit (ulimit -Hn) is {most}: raising that takes root"
        if most is not None and most < needed
        else ""
    )
    log.warning(
        "this process may open %d files at once (ulimit -n), and %s need about %d: some will "
        "fail with 'Too many open files'. Raise the limit in the shell that starts it "
        "(ulimit -n %d)%s",
        soft,
        reasons,
        needed,
        needed,
        above_hard,
    )
