"""Serving over stdin/stdout: what Claude Desktop and other local clients launch.

stdout carries the protocol only: logs and traces go to stderr. While serving, fd 0 reads
the null device and fd 1 writes to stderr (and `sys.stdout` is stderr's, by line), so a tool
(or a child it starts) that reads stdin or prints cannot steal the client's bytes or corrupt
the wire; the protocol runs on private duplicates. Each line is one message, checked by `check_message` before the server sees it:
a line that is not JSON-RPC is answered with its error, never dropped in silence, and so is a
request whose id is still in flight (-32600; it does not run: its answer could not be told
from the first one's; once that is answered, or cancelled, the id is free). A line
longer than the cap (`max_request_bytes`, as HTTP caps a body) is answered with -32600 once
the cap is passed, and the rest of it is read and dropped, never held: memory stays flat
whatever a client writes, and nothing of it reaches a server downstream. At the end
of stdin the server stops once every request read is answered (or cancelled by the client),
so a client that writes its requests and closes stdin gets every answer (a client that will
not wait ends the process with a signal, as the spec has it, which cancels what still runs);
a `subscriptions/listen` stream, answered only when it ends, is not waited for. A request to
the client (sampling, elicitation, roots) cannot be answered from then on: it is answered for
the client at once, "the client closed its input" (`stdio_in_flight`), so a call that needed
it ends saying so rather than hold the server. Nor is anything waited for once stdout's
reader is gone too (a client killed mid-call): no answer can reach it, so what still runs is
cancelled and the server stops, rather than wait for the calls' timeouts.

Told to stop (`stop`: SIGTERM, SIGHUP or Ctrl-C to `serve --stdio`), it stops as `serve --http`
does (`draining`): a new call gets an error result saying the gateway is shutting down, every
other request is answered, and the calls in flight get `SHUTDOWN_GRACE` seconds to finish;
then it reads no more, the calls still running are answered with an error result saying so,
and it returns once every answer is written (within `ANSWER_SLACK` seconds).

Pipes and sockets (what a client that launches us hands over) are read and written on the
event loop, non-blocking; anything else (a file, a terminal) in a worker thread, a hand-off
per read and per write (bench/RESULTS.md, item 67).

A server may offer a `Shortcut` (`stdio_shortcut`): each message is offered to it first, and
what it takes it answers with lines of its own, past the SDK's server (`served.stdio_shortcut`:
proxied calls passed straight through, a warm `tools/list` answered again).
"""

from __future__ import annotations

import ctypes
import fcntl
import logging
import os
import select
import stat
import sys
from collections.abc import Awaitable, Callable, Generator
from contextlib import contextmanager, suppress
from typing import Any, Protocol, TextIO

import anyio
import anyio.abc
import mcp_types as types
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp.server import Server
from mcp.shared.message import SessionMessage

from ..server import init_options
from .draining import (
    ANSWER_SLACK,
    CUT_OFF,
    FOLLOW_UP,
    SHUTDOWN_GRACE,
    SHUTTING_DOWN,
    Drains,
    EndsCalls,
    drained_or_ended,
)
from .envelope import (
    HEAD_BYTES,
    Refusal,
    decode_message,
    duplicate_id,
    too_long,
    typed_message,
)
from .stdio_in_flight import CLOSED_INPUT, Asked, Unanswered

__all__ = ["Shortcut", "WriteLine", "serve_pipes", "serve_stdio"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 16
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The longest line taken by default: HTTP's body limit (`max_request_bytes`)."""
_PIPE_SIZE = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size

JsonObject = dict[str, Any]
WriteLine = Callable[[bytes], Awaitable[None]]
"""Writes one message (JSON, no newline) to the client, among the server's."""


class Shortcut(Protocol):
    """Takes some of the client's messages past the SDK's server."""

    def take(self, message: JsonObject, write: WriteLine) -> Awaitable[bool] | None:
        """None: the server's to answer. Else the work of answering it, run in a task of its
        own, with `write`: True once done (answered, or ended as the server would end it),
        False if the server must answer it after all (nothing written)."""
        ...

    def answered(self, request_id: object, line: bytes) -> None:
        """The server answered `request_id` with `line` (a result or an error), as written."""
        ...

    def input_ended(self, answer: types.ErrorData) -> None:
        """The client's input ended: its questions waiting, and those asked later, get
        `answer` (`stdio_in_flight`)."""
        ...


async def serve_stdio(
    server: Server[Any],
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    stop: anyio.Event | None = None,
) -> None:
    """Serve one client until it closes stdin, or until `stop` is set (then the calls in flight
    get their grace: see above); a line longer than `max_message_bytes` is refused."""
    with _claimed(0, os.O_RDONLY) as stdin, _claimed(1, os.O_WRONLY) as stdout:
        await _serve(server, stdin, stdout, max_message_bytes, stop)


async def serve_pipes(
    server: Server[Any],
    read_fd: int,
    write_fd: int,
    *,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
    stop: anyio.Event | None = None,
) -> None:
    """Serve one client on two file descriptors (a pipe's or a socket's), as `serve_stdio`
    serves stdin and stdout, until `read_fd` ends or `stop` is set; the caller owns both."""
    for fd in (read_fd, write_fd):
        os.set_blocking(fd, False)
    await _serve(server, _Fd(read_fd), _Fd(write_fd), max_message_bytes, stop)


async def _serve(
    server: Server[Any], stdin: _Fd, stdout: _Fd, max_message_bytes: int, stop: anyio.Event | None
) -> None:
    to_server, server_reads = anyio.create_memory_object_stream[SessionMessage | Exception]()
    server_writes, to_client = anyio.create_memory_object_stream[SessionMessage | bytes]()
    unanswered = Unanswered()
    shortcut: Shortcut | None = getattr(server, "stdio_shortcut", None)
    reader = _Reader(to_server, server_writes.clone(), unanswered, shortcut, max_message_bytes)

    async def serve() -> None:
        async with anyio.create_task_group() as writing:
            # The writer ends once every sender is closed, after the last answer is out.
            writing.start_soon(_write_lines, to_client, stdout, unanswered, shortcut, reader)
            async with server_writes, anyio.create_task_group() as reading:
                reading.start_soon(reader.run, stdin, stdout)
                await server.run(server_reads, server_writes, init_options(server))
                reading.cancel_scope.cancel()

    if stop is None:
        await serve()
    else:
        await _until_stopped(serve, server, reader, unanswered, stop)


async def _until_stopped(
    serve: Callable[[], Awaitable[None]],
    server: Server[Any],
    reader: _Reader,
    unanswered: Unanswered,
    stop: anyio.Event,
) -> None:
    """`await serve()` until it ends (the end of stdin), or until `stop` is set or this is
    cancelled: then as `serve_http` stops (`draining`), the answers of the calls it ends
    written before it returns. After `stop`, a cancel (a second signal) cuts the grace short;
    cancelled before, the grace is ours to give."""
    finished = anyio.Event()
    # Shielded: a cancel must not take the answers of the calls it ends with it.
    serving = anyio.CancelScope(shield=True)

    async def run(tg: anyio.abc.TaskGroup) -> None:
        with serving:
            try:
                await serve()
            finally:
                finished.set()
        tg.cancel_scope.cancel()  # it ended on its own

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, tg)
        told = False
        try:
            await stop.wait()
            told = True
        finally:
            if not finished.is_set():
                await _drain(server, reader, unanswered, serving, finished, told=told)


async def _drain(
    server: Server[Any],
    reader: _Reader,
    unanswered: Unanswered,
    serving: anyio.CancelScope,
    finished: anyio.Event,
    *,
    told: bool,
) -> None:
    """New calls refused, those in flight given the grace (`told`: a cancel cuts it short),
    then those left answered with an error result, and the rest cancelled once `serving`
    has had `ANSWER_SLACK` seconds to write their answers."""
    if isinstance(server, Drains):
        server.refuse_calls(SHUTTING_DOWN)
    unanswered.count()
    try:
        with anyio.CancelScope(shield=not told), anyio.move_on_after(SHUTDOWN_GRACE):
            if isinstance(server, Drains):
                await drained_or_ended(server, unanswered, finished)
            else:
                await unanswered.quiet(FOLLOW_UP)
    finally:
        if isinstance(server, EndsCalls):
            server.end_calls(CUT_OFF)
        reader.stop()  # then the reader waits for the answers, as at the end of stdin
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(ANSWER_SLACK):
                await finished.wait()
            serving.cancel()
            await finished.wait()


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
            except ConnectionResetError:  # a socket's client went away: the end, as for a pipe
                return b""

    async def wait_unread(self) -> None:
        """Return once nothing reads what is written here any more: the pipe's read end is
        closed (POLLERR), or the socket's peer (POLLHUP). Linux only (epoll); elsewhere, and
        for a file or a terminal, never."""
        epoll = getattr(select, "epoll", None)
        if not self.polled or epoll is None:
            await anyio.sleep_forever()
            return
        # An epoll instance of our own, polled by the loop: it is readable once the fd has
        # an error or a hang-up (always reported, whatever the mask), with no busy wait while
        # the fd is merely writable.
        with epoll() as watch:
            watch.register(self.fd, 0)
            while not watch.poll(0):
                await anyio.wait_readable(watch.fileno())

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


class _Reader:
    """Cuts stdin into lines, checks each, and hands it to the shortcut or the server."""

    def __init__(
        self,
        to_server: ObjectSendStream[SessionMessage | Exception],
        to_client: ObjectSendStream[SessionMessage | bytes],
        unanswered: Unanswered,
        shortcut: Shortcut | None,
        max_message_bytes: int,
    ) -> None:
        self._to_server = to_server
        self._to_client = to_client
        self._unanswered = unanswered
        self._shortcut = shortcut
        self._limit = max_message_bytes
        self._taken: anyio.abc.TaskGroup | None = None
        self._reading = anyio.CancelScope()
        self._asked = Asked()

    def stop(self) -> None:
        """Read no more (the server stops): answer what was read, then end, as at the end of
        stdin."""
        self._reading.cancel()

    async def run(self, stdin: _Fd, stdout: _Fd) -> None:
        async with self._to_server, self._to_client, anyio.create_task_group() as self._taken:
            with self._reading:
                await self._read(stdin)
            if not self._reading.cancelled_caught:  # the end of stdin (not `stop`)
                self._input_ended()
            # Closing `to_server` stops the server and cancels what it still runs.
            async with anyio.create_task_group() as waiting:
                # A client killed mid-call closed stdout too: nothing written would arrive,
                # and until something is written only this notices.
                waiting.start_soon(self._give_up_once_unread, stdout)
                await self._unanswered.all_answered()
                waiting.cancel_scope.cancel()
            # What is left was cancelled by the client, or the client is gone.
            self._taken.cancel_scope.cancel()
        self._taken = None

    def asks(self, request_id: types.RequestId) -> bool:
        """Note the server's request `request_id` to the client, about to be written: False
        once the client's input has ended, when it is answered for the client instead
        (`CLOSED_INPUT`) and must not be written."""
        if self._asked.asks(request_id):
            return True
        if self._taken is not None:  # else the server stops: it ends its requests itself
            self._taken.start_soon(self._unanswerable, request_id)
        return False

    def _input_ended(self) -> None:
        """Nothing the client might answer can arrive: what the server and the shortcut wait
        on is answered for it, now."""
        if self._shortcut is not None:
            self._shortcut.input_ended(CLOSED_INPUT)
        assert self._taken is not None
        for request_id in self._asked.end():
            self._taken.start_soon(self._unanswerable, request_id)

    async def _unanswerable(self, request_id: types.RequestId) -> None:
        error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=CLOSED_INPUT)
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await self._to_server.send(SessionMessage(error))

    async def _read(self, stdin: _Fd) -> None:
        """Take the lines of `stdin` to its end."""
        pending: list[bytes] = []  # a line's parts so far: joined once, however many reads
        held = 0  # their bytes
        dropping = False  # the rest of a line refused as too long: read, never kept
        limit = self._limit
        while chunk := await stdin.read():
            start = 0
            while (end := chunk.find(b"\n", start)) >= 0:
                if not pending and not dropping and end - start <= limit:
                    await self._take(chunk[start:end])  # the usual line: in one read
                elif dropping:
                    dropping = False
                else:
                    if held + end - start > limit:
                        await self._refuse_long(pending, chunk[start:end])
                    else:
                        pending.append(chunk[start:end])
                        await self._take(b"".join(pending))
                    pending.clear()
                    held = 0
                start = end + 1
            if start < len(chunk) and not dropping:
                held += len(chunk) - start
                if held > limit:
                    await self._refuse_long(pending, chunk[start:])
                    pending.clear()
                    held = 0
                    dropping = True
                else:
                    pending.append(chunk[start:])
        if not dropping:
            await self._take(b"".join(pending))  # a last line with no newline

    async def _give_up_once_unread(self, stdout: _Fd) -> None:
        await stdout.wait_unread()
        log.info("stdout is no longer read: cancelling the requests in flight")
        self._unanswered.give_up()

    async def _refuse_long(self, parts: list[bytes], more: bytes) -> None:
        """Answer a line longer than the limit, of which `parts` and `more` came so far."""
        head = bytearray()
        for part in (*parts, more):
            head += part[: HEAD_BYTES - len(head)]
        log.warning("refused a message longer than %d bytes (max_request_bytes)", self._limit)
        await self._refuse(too_long(head, self._limit))

    async def _refuse(self, refusal: Refusal) -> None:
        """Answer a message never taken: as bytes, which settle no request (its id may be one
        still in flight)."""
        await self._to_client.send(refusal.body())

    async def _take(self, line: bytes) -> None:
        if not line.strip():
            return  # an empty line frames nothing
        message = decode_message(line)
        if isinstance(message, Refusal):
            await self._refuse(message)
            return
        if "method" not in message:  # an answer: perhaps to the server's request
            self._asked.answered(message.get("id"))
        if not self._unanswered.read(message):
            await self._refuse(duplicate_id(message["id"]))
            return
        if self._shortcut is not None:
            taken = self._shortcut.take(message, self._to_client.send)
            if taken is not None:
                assert self._taken is not None
                self._taken.start_soon(self._answer, message, taken)
                return
        await self._to_server_typed(message)

    async def _answer(self, message: JsonObject, taken: Awaitable[bool]) -> None:
        request_id = message.get("id")
        try:
            answered = await taken
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            return  # the client is gone (`_write_lines`)
        except Exception:  # a bug must not take the connection down, nor leave the client waiting
            log.exception("answering %r past the server failed", message.get("method"))
            error = types.ErrorData(code=types.INTERNAL_ERROR, message="Internal error")
            if request_id is not None:
                reply = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error)
                await self._to_client.send(SessionMessage(reply))
            return
        if not answered:  # nothing written: the server answers it after all
            await self._to_server_typed(message)
        elif request_id is not None:
            self._unanswered.settle(request_id, message)

    async def _to_server_typed(self, message: JsonObject) -> None:
        typed = typed_message(message)
        if isinstance(typed, Refusal):
            await self._to_client.send(SessionMessage(typed.error()))
        else:
            await self._to_server.send(SessionMessage(typed))


async def _write_lines(
    messages: ObjectReceiveStream[SessionMessage | bytes],
    stdout: _Fd,
    unanswered: Unanswered,
    shortcut: Shortcut | None,
    reader: _Reader,
) -> None:
    async with messages:
        async for message in messages:
            if isinstance(message, bytes):  # a shortcut's (it settles its own request) or a refusal
                data = message
            else:
                asked = message.message
                if isinstance(asked, types.JSONRPCRequest) and not reader.asks(asked.id):
                    continue  # the client can no longer answer it: answered for it
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True).encode()
            try:
                await stdout.write(data + b"\n")
            except OSError:  # the client is gone; closing `messages` tells the senders
                unanswered.give_up()
                return
            if not isinstance(message, bytes):
                written = message.message
                if isinstance(written, types.JSONRPCResponse | types.JSONRPCError):
                    unanswered.settle(written.id)
                    if shortcut is not None:
                        shortcut.answered(written.id, data)


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
    (stdin: the null device; stdout: stderr, and `sys.stdout` with it) and is restored on
    exit, flags included."""
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
        if mode == os.O_RDONLY:
            yield end
        else:
            with _printing_to_stderr():
                yield end
    finally:
        fcntl.fcntl(private, fcntl.F_SETFL, flags)
        os.dup2(private, fd)
        # stdin's duplicate stays open: a reader thread abandoned at shutdown may still
        # block on it.
        if mode != os.O_RDONLY:
            os.close(private)


@contextmanager
def _printing_to_stderr() -> Generator[None]:
    """While fd 1 points at stderr, what a tool prints goes there as it prints it. Python's
    `sys.stdout` and C's stdio buffer by blocks on a pipe: what they hold would be written
    at exit, once fd 1 is the protocol's again, so both are flushed while fd 1 is
    stderr, and `sys.stdout` is stderr's line-buffered stream meanwhile."""
    original = sys.stdout
    _flush(original)  # what was printed before serving: to stderr now, not the protocol
    if original is not None:
        sys.stdout = sys.stderr
    try:
        yield
    finally:
        if sys.stdout is sys.stderr:
            sys.stdout = original
        _flush(original)  # held by a tool that kept `sys.stdout` (a logging handler, say)
        _flush(sys.__stdout__)
        with suppress(Exception):  # no C library to load (not POSIX)
            ctypes.CDLL(None).fflush(None)  # a C extension's printf, else flushed at exit


def _flush(stream: TextIO | None) -> None:
    with suppress(OSError, ValueError):  # closed, or stderr gone: what was printed is lost
        if stream is not None:
            stream.flush()
