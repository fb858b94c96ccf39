"""Serving over stdin/stdout: what Claude Desktop and other local clients launch.

stdout carries the protocol only: logs and traces go to stderr. While serving, fd 0 reads
the null device and fd 1 writes to stderr, so a tool (or a child it starts) that reads stdin
or prints cannot steal the client's bytes or corrupt the wire; the protocol runs on private
duplicates. Each line is one message, checked by `check_message` before the server sees it:
a line that is not JSON-RPC is answered with its error, never dropped in silence.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, BinaryIO

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage

from ..server import init_options
from .envelope import Refusal, check_message

__all__ = ["serve_stdio"]


async def serve_stdio(server: Server[Any]) -> None:
    """Serve one client until it closes stdin."""
    with _claimed(0, os.O_RDONLY) as stdin_fd, _claimed(1, os.O_WRONLY) as stdout_fd:
        # closefd=False: a reader thread abandoned at shutdown may still block on stdin_fd.
        stdin = os.fdopen(stdin_fd, "rb", closefd=False)
        to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception]()
        server_writes, to_client = anyio.create_memory_object_stream[SessionMessage]()
        async with anyio.create_task_group() as writing:
            # The writer ends once every sender is closed, after the last answer is out.
            writing.start_soon(_write_lines, to_client, stdout_fd)
            async with server_writes, anyio.create_task_group() as reading:
                reading.start_soon(_read_lines, stdin, to_server, server_writes.clone())
                await server.run(server_reads, server_writes, init_options(server))
                reading.cancel_scope.cancel()


async def _read_lines(
    stdin: BinaryIO,
    to_server: ObjectSendStream[SessionMessage | Exception],
    to_client: ObjectSendStream[SessionMessage],
) -> None:
    async with to_server, to_client:
        while line := await anyio.to_thread.run_sync(stdin.readline, abandon_on_cancel=True):
            if not line.strip():
                continue  # an empty line frames nothing
            checked = check_message(line)
            if isinstance(checked, Refusal):
                await to_client.send(SessionMessage(checked.error()))
            else:
                await to_server.send(SessionMessage(checked))


async def _write_lines(messages: ObjectReceiveStream[SessionMessage], stdout_fd: int) -> None:
    async with messages:
        async for message in messages:
            data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
            try:
                await anyio.to_thread.run_sync(_write_all, stdout_fd, data.encode() + b"\n")
            except OSError:  # the client is gone; closing `messages` tells the senders
                return


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


@contextmanager
def _claimed(fd: int, mode: int) -> Generator[int]:
    """A private duplicate of `fd` for the protocol; `fd` itself points elsewhere meanwhile
    (stdin: the null device; stdout: stderr) and is restored on exit."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    elsewhere = os.open(os.devnull, mode) if mode == os.O_RDONLY else os.dup(2)
    os.dup2(elsewhere, fd)
    os.close(elsewhere)
    try:
        yield private
    finally:
        os.dup2(private, fd)
        if mode != os.O_RDONLY:  # stdin's duplicate stays open: see `closefd=False` above
            os.close(private)
