"""A stdio server's process group, ended whole whenever the server stops.

A stdio server starts in a session of its own (`stdio_process.spawn`): its process group's id
is its pid, and what it starts (`npx` its node, `uvx` its Python, a worker) is in that group
unless it leaves on purpose (a daemon's `setsid`). The SDK's stop ends the group only when the
server outlives its grace; a server that exits at its stdin's end, or crashes, would leave its
children running for ever (one holding its stdout would also keep its connection open). So
once the server has exited, for whatever reason, what is left of its group gets SIGTERM, the
SDK's grace, then SIGKILL: when it is stopped (`stop`), and when it exits mid-run (`watch`,
on Linux, whose pidfds tell of an exit).

Signalling the group by its id is safe because the server is reaped only after its group is
ended (`PipedProcess.reap`): until then its zombie holds its pid, and the kernel gives no new
process a pid that is held, so the group with that id is ours; no signal is sent after the reap.

Who is left is read from `/proc` (Linux): each process's group. Where there is no `/proc`
(macOS) only the server itself can be seen going: the group gets SIGTERM, and SIGKILL only if
the server outlives the grace.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Awaitable, Callable
from contextlib import suppress

import anyio
import anyio.to_thread
from mcp.client.stdio import FORCE_KILL_TIMEOUT, PROCESS_TERMINATION_TIMEOUT

from .stdio_process import PipedProcess

__all__ = ["ServerGroup", "kill_stdio_servers"]

log = logging.getLogger(__name__)

_KILL_WAIT_SECONDS = 2.0
"""As the SDK: how long what got SIGKILL may take to go (only an unkillable process takes it)."""
_POLL_SECONDS = 0.01
"""How often to look again for a process where the system has no pidfd to wait on."""

_running: set[int] = set()
"""The stdio servers running in this process, each one's pid: its process group's id. A pid
leaves before it is reaped, so that `kill_stdio_servers` signals only groups that are ours."""


def kill_stdio_servers() -> None:
    """End every stdio server this process started, and what they started, at once: SIGKILL
    to each one's process group. For a second Ctrl-C, which leaves no time to stop them the
    usual way (stdin closed, a grace period, SIGTERM): in their own sessions, the terminal's
    SIGINT never reached them, and they would live on. Safe in a signal handler."""
    for pid in list(_running):
        _signal(pid, signal.SIGKILL)


class ServerGroup:
    """The process group of one running stdio server (`process`, its leader)."""

    def __init__(self, process: PipedProcess) -> None:
        self._process = process
        self._ending = anyio.Lock()
        self._reaped = False
        _running.add(process.pid)

    async def watch(self) -> None:
        """Once the server exits on its own (crashed, done), end what is left of its group: a
        child holding its stdout would keep the connection open, its calls waiting."""
        if not hasattr(os, "pidfd_open"):
            return  # (macOS) seen only by polling, for the server's whole life: `stop` ends it
        await self._process.wait()
        await self._end()

    async def stop(self) -> None:
        """Stop the server as the SDK does (stdin closed, its grace to exit), then end its
        group whole, the server too if it lives on, and reap it. Bounded as the SDK's: 6 s at
        most (an unkillable process)."""
        process = self._process
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        with anyio.move_on_after(PROCESS_TERMINATION_TIMEOUT):
            await process.wait()
        await self._end()  # waits for the server too, while it lives
        async with self._ending:  # not while the watcher signals the group
            self._reaped = True
            _running.discard(process.pid)
            process.reap()  # last: its pid, the group's id, may be anyone's after this
        if process.returncode is None:
            log.warning(
                "MCP server process %d is still alive after SIGKILL; abandoning it", process.pid
            )
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdout.aclose()

    async def _end(self) -> None:
        """SIGTERM to what is alive in the group, its grace, then SIGKILL; once at a time (the
        watcher and `stop` may both come), each wait bounded."""
        async with self._ending:
            if self._reaped:
                return
            with anyio.CancelScope(shield=True):
                await _end_group(self._process)


async def _end_group(process: PipedProcess) -> None:
    pgid = process.pid

    async def left() -> list[int]:
        # The server's own exit is told by `returncode`: /proc reads a multithreaded process
        # as a zombie once its main thread exits, before it can be reaped.
        others = await _others_in(pgid) or []
        return others if process.returncode is not None else [pgid, *others]

    if process.returncode is not None and await _others_in(pgid) == []:
        return
    _signal(pgid, signal.SIGTERM)
    with anyio.move_on_after(FORCE_KILL_TIMEOUT):
        await _gone(left)
        return
    _signal(pgid, signal.SIGKILL)
    with anyio.move_on_after(_KILL_WAIT_SECONDS):
        await _gone(left)


async def _gone(left: Callable[[], Awaitable[list[int]]]) -> None:
    """Return once no process is `left`: those seen, then any they started meanwhile."""
    while pids := await left():
        for pid in pids:
            await _exit_of(pid)


def _signal(pgid: int, signum: int) -> None:
    with suppress(ProcessLookupError, PermissionError):  # gone; or not ours to end (setuid)
        os.killpg(pgid, signum)


async def _others_in(pgid: int) -> list[int] | None:
    """The live processes in group `pgid` but its leader (zombies are dead), None where none
    can be seen (no /proc)."""
    return await anyio.to_thread.run_sync(_read_group, pgid)


def _read_group(pgid: int) -> list[int] | None:
    if not os.path.isdir("/proc/self"):
        return None
    found: list[int] = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                text = stat.read()
        except OSError:  # gone meanwhile
            continue
        # pid (comm) state ppid pgrp ...: comm may hold anything, ")" too, so split after the last
        state, _ppid, pgrp, *_ = text[text.rindex(b")") + 2 :].split(maxsplit=3)
        if int(pgrp) == pgid and state not in (b"Z", b"X") and int(name) != pgid:
            found.append(int(name))
    return found


async def _exit_of(pid: int) -> None:
    """Return once process `pid` (anyone's child) has exited, or at once if it has."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):  # no pidfds here: the caller looks again
        await anyio.sleep(_POLL_SECONDS)
        return
    try:
        await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)
