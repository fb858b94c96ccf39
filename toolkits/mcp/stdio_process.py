"""A stdio server's process: on POSIX spawned with only its stdin, stdout and stderr open.

`anyio.open_process` spawns through the event loop. asyncio's loop spawns as `subprocess`
does, closing every other fd in the child; uvloop's (the CLI's default) does not (its
`close_fds` is unimplemented), and hands libuv stdio ends it made inheritable, which libuv
duplicates onto 0-2 without closing: the server kept a second copy of its own stdout (and every
inheritable fd of ours), so when it closed fd 1 and lived on, its stdout never ended and each
call waited out its timeout. Here the process is spawned by `subprocess` itself (`close_fds`,
a session of its own as the SDK's), under any loop, and its pipes are read and written through
the loop's readiness waits (`anyio.wait_readable`), which every backend has.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import anyio
import anyio.lowlevel
from anyio.abc import ByteReceiveStream, ByteSendStream, Process
from mcp.client.stdio import (
    StdioServerParameters,
    _create_platform_compatible_process,  # pyright: ignore[reportPrivateUsage]
)
from mcp.os.win32.utilities import FallbackProcess

__all__ = ["PipedProcess", "spawn", "started"]

_EXIT_POLL_SECONDS = 0.05
"""How often `wait` looks where the system has no pidfd to wait on (not Linux)."""


async def started(
    command: str, server: StdioServerParameters, env: dict[str, str], errlog: TextIO
) -> Process | FallbackProcess:
    """The server's process, with no fd of ours but its stdio (`spawn`: at once, no await). On
    Windows the SDK's, shielded: cancelled while spawning (a gateway that stops as it starts),
    it would live on unowned; spawned, the cancellation ends it. Raises `OSError` naming what
    was not found."""
    try:
        if sys.platform != "win32":
            return spawn(command, server.args, env, errlog, server.cwd)
        with anyio.CancelScope(shield=True):
            return await _create_platform_compatible_process(
                command=command, args=server.args, env=env, errlog=errlog, cwd=server.cwd
            )
    except OSError as exc:
        raise _not_started(server, env.get("PATH"), exc) from None
    raise AssertionError("unreachable: a shield swallows no exception")


def _not_started(server: StdioServerParameters, path: str | None, exc: OSError) -> OSError:
    """`exc` naming what was not found: a spawn names one of the command and the working
    directory, not always the one missing (uvloop's named neither)."""
    if not isinstance(exc, FileNotFoundError | PermissionError) or exc.errno is None:
        return exc
    command, cwd = server.command, server.cwd
    if cwd is not None and not os.path.isdir(cwd):
        where = "" if os.path.isabs(cwd) else f" (relative to this process's, {os.getcwd()})"
        return FileNotFoundError(
            f"the server's working directory {str(cwd)!r}{where} does not exist"
        )
    found = command if os.sep in command else shutil.which(command, path=path)
    if isinstance(exc, FileNotFoundError) and found is not None and os.path.exists(found):
        return FileNotFoundError(
            f"command {found!r} exists, but the interpreter its #! names does not"
        )
    if found is None:
        return FileNotFoundError(f"command {command!r} not found on PATH")
    return type(exc)(exc.errno, os.strerror(exc.errno), command)  # as asyncio words it


def spawn(
    command: str, args: list[str], env: dict[str, str], errlog: TextIO, cwd: str | Path | None
) -> PipedProcess:
    """Start `command` with `args` in a session of its own (its process group, ended whole
    when it stops: `process_group`), stderr to `errlog`, nothing else of ours open in it. Raises
    `OSError` as `subprocess` does (`FileNotFoundError` naming the command, ...)."""
    stdin_read, stdin_write = os.pipe()  # non-inheritable: only the child's dup2 keeps them
    stdout_read, stdout_write = os.pipe()
    try:
        popen = subprocess.Popen(
            [command, *args],
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=errlog,
            env=env,
            cwd=cwd,
            close_fds=True,
            start_new_session=True,
        )
    except BaseException:
        os.close(stdin_write)
        os.close(stdout_read)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    return PipedProcess(popen, _FdSendStream(stdin_write), _FdReceiveStream(stdout_read))


class _FdReceiveStream(ByteReceiveStream):
    """The read end of a pipe, non-blocking, read when the loop says it is readable."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def receive(self, max_bytes: int = 65536) -> bytes:
        while True:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                data = os.read(self._fd, max_bytes)
            except BlockingIOError:
                await anyio.wait_readable(self._fd)
                continue
            if not data:
                raise anyio.EndOfStream
            await anyio.lowlevel.checkpoint()  # a server writing without pause yields too
            return data

    async def aclose(self) -> None:
        _close(self)
        await anyio.lowlevel.checkpoint()


class _FdSendStream(ByteSendStream):
    """The write end of a pipe, non-blocking, written when the loop says it is writable."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd

    async def send(self, item: bytes) -> None:
        view = memoryview(item)
        while view:
            if self._fd < 0:
                raise anyio.ClosedResourceError
            try:
                view = view[os.write(self._fd, view) :]
            except BlockingIOError:
                await anyio.wait_writable(self._fd)
            except (BrokenPipeError, ConnectionResetError) as exc:
                raise anyio.BrokenResourceError from exc
        await anyio.lowlevel.checkpoint()

    async def aclose(self) -> None:
        _close(self)
        await anyio.lowlevel.checkpoint()


def _close(stream: _FdReceiveStream | _FdSendStream) -> None:
    fd, stream._fd = stream._fd, -1  # pyright: ignore[reportPrivateUsage]
    if fd >= 0:
        anyio.notify_closing(fd)  # a task waiting on it raises ClosedResourceError
        os.close(fd)


class PipedProcess(Process):
    """`popen` as anyio's `Process`, its pipes as byte streams. Its exit is seen without
    reaping it: only `reap` does, once its process group is ended, for until then its zombie
    holds its pid, which is the group's id (`process_group`)."""

    def __init__(
        self, popen: subprocess.Popen[bytes], stdin: ByteSendStream, stdout: ByteReceiveStream
    ) -> None:
        self._popen = popen
        self._stdin = stdin
        self._stdout = stdout

    async def aclose(self) -> None:
        await self._stdin.aclose()
        await self._stdout.aclose()
        await self.wait()
        self.reap()

    async def wait(self) -> int:
        """Its exit status once it exits (negative: the signal that ended it), not reaped."""
        while (status := self.returncode) is None:
            try:
                pidfd = os.pidfd_open(self._popen.pid)
            except (AttributeError, OSError):  # no pidfds here
                await anyio.sleep(_EXIT_POLL_SECONDS)
                continue
            try:
                await anyio.wait_readable(pidfd)  # readable once it exits
            finally:
                os.close(pidfd)
        return status

    def reap(self) -> None:
        """Release its zombie, once it has exited (its pid may then be given to another)."""
        if self.returncode is not None:
            self._popen.poll()

    def terminate(self) -> None:
        self._popen.terminate()

    def kill(self) -> None:
        self._popen.kill()

    def send_signal(self, signal: int) -> None:
        self._popen.send_signal(signal)

    @property
    def pid(self) -> int:
        return self._popen.pid

    @property
    def returncode(self) -> int | None:
        if self._popen.returncode is not None or not hasattr(os, "waitid"):
            return self._popen.poll()  # reaped, or no other way to see it (it reaps)
        try:
            exited = os.waitid(os.P_PID, self._popen.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped by someone else: poll says 0
            return self._popen.poll()
        if exited is None:
            return None
        if exited.si_code in (os.CLD_KILLED, os.CLD_DUMPED):
            return -exited.si_status
        return exited.si_status

    @property
    def stdin(self) -> ByteSendStream:
        return self._stdin

    @property
    def stdout(self) -> ByteReceiveStream:
        return self._stdout

    @property
    def stderr(self) -> ByteReceiveStream | None:
        return None
