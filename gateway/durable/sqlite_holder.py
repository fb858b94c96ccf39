"""Who holds a SQLite file's write lock, where the system tells (Linux's `/proc/locks`).

SQLite's locks are the file's POSIX locks: in write-ahead-log mode a writer holds byte 120
of the `-shm` file, else the database file's RESERVED byte. `/proc/locks` names the process
that holds each, so a warning about a locked run store can say who holds it rather than
guess.
"""

from __future__ import annotations

import os
import re

__all__ = ["write_lock_holder"]

_WAL_WRITE_BYTE = 120
"""The write lock's byte in a write-ahead log's index (`-shm`)."""
_RESERVED_BYTE = 0x40000001
"""The write lock's byte in a database file without a write-ahead log."""
_PLAIN = re.compile(r"[\w.-]{1,40}")
"""A command's argument said with its name: a word (a subcommand, a file's name)."""


def write_lock_holder(file: str, *, locks: str = "/proc/locks") -> str | None:
    """Who holds the write lock of the SQLite database `file`, in words (`process 4242
    (sqlite3 runs.sqlite3)`, `this process`); None when it cannot be told: `locks` cannot be
    read (not Linux), or no process holds it now."""
    wanted: list[tuple[tuple[int, int, int], int]] = []
    for path, byte in ((f"{file}-shm", _WAL_WRITE_BYTE), (file, _RESERVED_BYTE)):
        try:
            found = os.stat(path)
        except OSError:
            continue
        wanted.append(((os.major(found.st_dev), os.minor(found.st_dev), found.st_ino), byte))
    try:
        with open(locks, encoding="ascii", errors="replace") as table:
            lines = table.read().splitlines()
    except OSError:
        return None
    for line in lines:
        pid = _holder(line.split(), wanted)
        if pid is not None:
            return _named(pid)
    return None


def _holder(fields: list[str], wanted: list[tuple[tuple[int, int, int], int]]) -> int | None:
    """The pid of a `/proc/locks` line (`1: POSIX ADVISORY WRITE 4242 fe:00:2277559 120
    120`) that holds one of `wanted` (file, byte) for writing; None for any other line (a
    blocked request's `->` line, a read lock, another file)."""
    if len(fields) != 8 or fields[3] != "WRITE":
        return None
    try:
        major, minor, inode = fields[5].split(":")
        file = (int(major, 16), int(minor, 16), int(inode))
        pid, start = int(fields[4]), int(fields[6])
        end = float("inf") if fields[7] == "EOF" else int(fields[7])
    except ValueError:
        return None
    if any(file == where and start <= byte <= end for where, byte in wanted):
        return pid
    return None


def _named(pid: int) -> str:
    if pid == os.getpid():
        return "this process"
    if pid <= 0:  # in another pid namespace (a container's host)
        return "a process not seen from here"
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            words = [w.decode(errors="replace") for w in cmdline.read().split(b"\0") if w]
    except OSError:
        words = []
    program = _program(words)
    return f"process {pid} ({program})" if program else f"process {pid}"


def _program(words: list[str]) -> str:
    """A process's program and its first argument, as `agent-gateway run` or `sqlite3
    runs.sqlite3`: no more of its command line, which may hold what is not ours to log."""
    words = [os.path.basename(w) if i == 0 else w for i, w in enumerate(words)]
    if words and words[0].startswith("python"):  # the program is its script or module
        rest = words[1:]
        if rest[:1] == ["-m"]:
            rest = rest[1:]
        if rest and not rest[0].startswith("-"):
            words = [os.path.basename(rest[0]), *rest[1:]]
    shown = words[:1]
    if len(words) > 1 and _PLAIN.fullmatch(words[1]):
        shown.append(words[1])
    return " ".join(shown)
