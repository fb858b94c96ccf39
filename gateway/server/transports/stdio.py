"""Serving over stdin/stdout: what Claude Desktop and other local clients launch.

stdout carries the protocol only: logs and traces go to stderr. While serving, fd 0 reads
the null device and fd 1 writes to stderr, so a tool (or a child it starts) that reads stdin
or prints cannot steal the client's bytes or corrupt the wire; the protocol runs on private
duplicates. Each line is one message, checked by `check_message` before the server sees it:
a line that is not JSON-RPC is answered with its error, never dropped in silence. At the end
of stdin the server stops once every request read is answered (or cancelled by the client),
so a client that writes its requests and closes stdin gets every answer (a client that will
not wait ends the process with a signal, as the spec has it, which cancels what still runs).

Pipes and sockets (what a client that launches us hands over) are read and written on the
event loop, non-blocking; anything else (a file, a terminal) in a worker thread, a hand-off
per read and per write (bench/RESULTS.md, item 67).
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Generator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage

from ..server import init_options
from .envelope import Refusal, check_message

__all__ = ["serve_stdio"]

_CHUNK = 1 << 16
_PIPE_SIZE = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client until it closes stdin."""
    with _claimed(0, os.O_RDONLY) as stdin, _claimed(1, os.O_WRONLY) as stdout:
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception]()
        server_writes, to_client = anyio.create_memory_object_stream[SessionMessage]()
        unanswered = _Unanswered()
        async with anyio.create_task_group() as writing:
            # The writer ends once every sender is closed, after the last answer is out.
            writing.start_soon(_write_lines, to_client, stdout, unanswered)
            async with server_writes, anyio.create_task_group() as reading:
                reading.start_soon(_read_lines, stdin, to_server, server_writes.clone(), unanswered)
                await server.run(server_reads, server_writes, init_options(server))
                reading.cancel_scope.cancel()


class _Fd:
    """One end of the protocol: a private file descriptor, polled if it can be."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        mode = os.fstat(fd).st_mode
        self.polled = stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)

    async def read(self) -> bytes:
        """Some bytes; b"" at the end."""
        if not self.polled:
            # abandon_on_cancel: a blocked read cannot be interrupted; the thread ends with
            # the process (the fd is never closed under it: see `_claimed`).
            return await anyio.to_thread.run_sync(os.read, self.fd, _CHUNK, abandon_on_cancel=True)
        while True:
            try:
                return os.read(self.fd, _CHUNK)
            except BlockingIOError:
                await anyio.wait_readable(self.fd)

    async def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if not self.polled:
                written = await anyio.to_thread.run_sync(os.write, self.fd, view)
            else:
                try:
                    written = os.write(self.fd, view)
                except BlockingIOError:
                    await anyio.wait_writable(self.fd)
                    continue
            view = view[written:]


class _Unanswered:
    """The client's requests the server has not answered yet."""

    def __init__(self) -> None:
        self._ids: set[object] = set()  # request ids, and whatever a cancel names
        self._none_left: anyio.Event | None = None
        self._client_gone = False

    def read(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCRequest):
            self._ids.add(message.id)
        elif (
            isinstance(message, types.JSONRPCNotification)
            and message.method == "notifications/cancelled"
            and message.params is not None
        ):
            # A cancelled request may never be answered (the spec: it SHOULD NOT be).
            self._settle(message.params.get("requestId"))

    def written(self, message: types.JSONRPCMessage) -> None:
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._settle(message.id)

    def give_up(self) -> None:
        """The client is gone: nothing more can reach it."""
        self._client_gone = True
        self._ids.clear()
        if self._none_left is not None:
            self._none_left.set()

    async def all_answered(self) -> None:
        if self._ids and not self._client_gone:
            self._none_left = anyio.Event()
            await self._none_left.wait()

    def _settle(self, request_id: object) -> None:
        self._ids.discard(request_id)
        if not self._ids and self._none_left is not None:
            self._none_left.set()


async def _read_lines(
    stdin: _Fd,
    to_server: ObjectSendStream[SessionMessage | Exception],
    to_client: ObjectSendStream[SessionMessage],
    unanswered: _Unanswered,
) -> None:
    async def take(line: bytes) -> None:
        if not line.strip():
            return  # an empty line frames nothing
        checked = check_message(line)
        if isinstance(checked, Refusal):
            await to_client.send(SessionMessage(checked.error()))
        else:
            unanswered.read(checked)
            await to_server.send(SessionMessage(checked))

    async with to_server, to_client:
        pending: list[bytes] = []  # a line's parts so far: joined once, however many reads
        while chunk := await stdin.read():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                pending.append(chunk[start:end])
                start = end + 1
                await take(b"".join(pending))
                pending.clear()
            if start < len(chunk):
                pending.append(chunk[start:])
        await take(b"".join(pending))  # a last line with no newline
        # Closing `to_server` stops the server and cancels what it still runs.
        await unanswered.all_answered()


async def _write_lines(
    messages: ObjectReceiveStream[SessionMessage], stdout: _Fd, unanswered: _Unanswered
) -> None:
    async with messages:
        async for message in messages:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await stdout.write(data.encode() + b"\n")
            except OSError:  # the client is gone; closing `messages` tells the senders
                unanswered.give_up()
                return
            unanswered.written(message.message)


def _widen(fd: int) -> None:
    """A pipe of 1 MiB rather than 64 kB where the system allows (Linux): a big message then
    goes in a write or two, not one wait for the other side per 64 kB (bench/RESULTS.md,
    item 67)."""
    resize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if resize is not None:
        with suppress(OSError):  # over the system's limit, or a socket
            fcntl.fcntl(fd, resize, _PIPE_SIZE)


@contextmanager
def _claimed(fd: int, mode: int) -> Generator[_Fd]:
    """A private duplicate of `fd` for the protocol; `fd` itself points elsewhere meanwhile
    (stdin: the null device; stdout: stderr) and is restored on exit, flags included."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    elsewhere = os.open(os.devnull, mode) if mode == os.O_RDONLY else os.dup(2)
    os.dup2(elsewhere, fd)
    os.close(elsewhere)
    end = _Fd(private)
    flags = fcntl.fcntl(private, fcntl.F_GETFL)
    if end.polled:  # the flag is the pipe end's, shared with `fd`: put back below
        fcntl.fcntl(private, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        _widen(private)
    try:
        yield end
    finally:
        fcntl.fcntl(private, fcntl.F_SETFL, flags)
        os.dup2(private, fd)
        # stdin's duplicate stays open: a reader thread abandoned at shutdown may still
        # block on it.
        if mode != os.O_RDONLY:
            os.close(private)
