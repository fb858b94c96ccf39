"""A stdio server's pipes, shared by the node's SDK session and the calls passed through.

The SDK's `stdio_client` parses every line the server writes into pydantic models for its
session; a call passed through (`forward`) wants its answer as the server sent it. `open_stdio`
starts and stops the server as the SDK does (its own functions, SDK private in mcp 2.3.0: a
process group of its own; on exit stdin closed, a grace period, then the process tree ended),
but for its process group, ended whole whenever the server exits (`process_group`), yields the
streams the SDK session expects, and puts a `Pipe` on the `StdioLink` meanwhile:

- A passed-through request is written to stdin as bytes; one lock orders it with the
  session's writes, so lines never interleave.
- The stdout reader parses a line as JSON only while such a request waits. The answer to
  one (its id) and its progress (its id as the progress token) go to that request's waiter;
  every other line goes to the session as the SDK's reader would hand it over, so the
  server's own requests, its log messages and its other notifications reach whoever the
  node routes them to (`server_requests`), and answers reach the session's requests.
- A request's message that came after lines handed to the session waits until the session
  has dispatched them (`_SessionFeed`): a log message of the call is attributed to it there,
  and must reach the caller before the result, as on the usual path.
- At the end of stdout every waiter's messages end (the call reports the connection lost),
  as the session's do.

Lines are split as bytes and joined once, so a result of megabytes costs one copy, not one per
read (the SDK's reader re-joins its whole buffer with every read). A line longer than
`max_line_bytes` (the server's `max_message_bytes`, as over HTTP) is dropped as it comes, unread,
with a warning naming the key; the request it answers (its id read at either end of the line:
`long_lines`) fails at once with an error saying so, on either path, and the connection reads
on: the next line is whole.
"""

from __future__ import annotations

import logging
import signal
from collections import deque
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Generator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO, cast

import anyio
import anyio.lowlevel
import mcp_types
from anyio.abc import ByteSendStream, ObjectReceiveStream, Process
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.client.stdio import (
    StdioServerParameters,
    _aclose_all,  # pyright: ignore[reportPrivateUsage]
    _drain_stdout,  # pyright: ignore[reportPrivateUsage]
    _get_executable_command,  # pyright: ignore[reportPrivateUsage]
    _stop_server_process,  # pyright: ignore[reportPrivateUsage]
    get_default_environment,
)
from mcp.os.win32.utilities import FallbackProcess
from mcp.shared.message import SessionMessage
from mcp_types import JSONRPCError, JSONRPCRequest, JSONRPCResponse

from ..json_bytes import json_bytes, read_json
from ..nesting import TooDeep
from ..well_formed import well_formed
from .answer_ids import AskedIds
from .config import DEFAULT_MAX_MESSAGE_BYTES
from .event_stream import AnswerTooLarge
from .launch_text import launchable
from .long_lines import OverLong, StrayLines, too_long_error
from .process_group import ServerGroup, kill_stdio_servers
from .stdio_process import PipedProcess, started

if TYPE_CHECKING:
    from mcp.client._transport import TransportStreams

__all__ = [
    "Pipe",
    "StampedPipe",
    "StdioLink",
    "kill_stdio_servers",
    "open_stdio",
    "too_deep_answer",
]

log = logging.getLogger(__name__)

JsonObject = dict[str, Any]

_READ_SIZE = 1 << 20
"""Most bytes taken from stdout at once (a read returns what the pipe holds)."""
_WRITER_FLUSH_SECONDS = 0.5
"""As the SDK: how long the session's accepted messages may take to go out at the end."""
_EXIT_WAIT_SECONDS = 0.5
"""How long a server whose stdout ended may take to exit before its calls are told it went
away without its exit status (a server may close stdout and live on)."""


class _Broken(Exception):
    """stdin is closed or broken: nothing more reaches the server."""


class _SessionFeed(ObjectReceiveStream[SessionMessage | Exception]):
    """The session's read stream, counting what the session has dispatched.

    The SDK's receive loop dispatches one message (a notification: a task started for it),
    then asks for the next; so when it asks, every message it took before is dispatched."""

    def __init__(self, stream: MemoryObjectReceiveStream[SessionMessage | Exception]) -> None:
        self._stream = stream
        self.handed = 0
        """Messages the reader handed over so far."""
        self._taken = 0
        self._dispatched = 0
        self._closed = False
        self._waiting: list[tuple[int, anyio.Event]] = []

    async def dispatched(self, count: int) -> None:
        """Return once the session dispatched its first `count` messages, behind the first step
        of the tasks it started for them (the event loop runs tasks in order). A log message
        of a passed-through call is attributed to it in that step (`server_requests`)."""
        if self._dispatched >= count or self._closed:
            await anyio.lowlevel.checkpoint()  # its tasks may not have run yet: after them
            return
        event = anyio.Event()
        self._waiting.append((count, event))
        await event.wait()

    def _caught_up(self) -> None:
        still: list[tuple[int, anyio.Event]] = []
        for count, event in self._waiting:
            if self._dispatched >= count or self._closed:
                event.set()
            else:
                still.append((count, event))
        self._waiting = still

    async def receive(self) -> SessionMessage | Exception:
        self._dispatched = self._taken
        if self._waiting:
            self._caught_up()
        item = await self._stream.receive()
        self._taken += 1
        return item

    def close(self) -> None:
        self._closed = True  # nobody waits on a session that is gone
        self._caught_up()
        self._stream.close()

    async def aclose(self) -> None:
        self.close()
        await anyio.lowlevel.checkpoint()


class _Waiter:
    """The messages of one passed-through request, as the reader hands them over.

    Lighter than a memory object stream (no step through the event loop per message when one
    is already there); only the reader puts, only the request's task takes. A message that
    came after lines handed to the session is taken only once the session dispatched them, so
    that the call hears its log messages before its result, as on the usual path."""

    __slots__ = ("_arrived", "_ended", "_failed", "_feed", "_messages", "_seen")

    def __init__(self, feed: _SessionFeed) -> None:
        self._messages: deque[tuple[JsonObject, int]] = deque()
        self._arrived: anyio.Event | None = None
        self._ended = False
        self._failed: TooDeep | AnswerTooLarge | None = None
        self._feed = feed
        self._seen = feed.handed

    def put(self, message: JsonObject) -> None:
        self._messages.append((message, self._feed.handed))
        if self._arrived is not None:
            self._arrived.set()

    def end(self) -> None:
        self._ended = True
        if self._arrived is not None:
            self._arrived.set()

    def fail(self, error: TooDeep | AnswerTooLarge) -> None:
        """Its answer came, but could not be read: iterating raises `error` after the rest."""
        self._failed = error
        self.end()

    def __aiter__(self) -> _Waiter:
        return self

    async def __anext__(self) -> JsonObject:
        while not self._messages:
            if self._failed is not None:
                raise self._failed
            if self._ended:
                raise StopAsyncIteration
            self._arrived = anyio.Event()
            await self._arrived.wait()
        message, handed = self._messages.popleft()
        if handed > self._seen:
            self._seen = handed
            await self._feed.dispatched(handed)
        return message


class Pipe:
    """The raw side of a stdio connection: the `Channel` of the calls passed through."""

    def __init__(
        self,
        stdin: ByteSendStream,
        feed: _SessionFeed,
        on_broken: Callable[[], None],
        asked: AskedIds,
    ) -> None:
        self._stdin = stdin
        self._feed = feed
        self.asked = asked
        # Fast: no step through the event loop when free (most writes find it so).
        self._lock = anyio.Lock(fast_acquire=True)
        self._waiters: dict[str, _Waiter] = {}
        self._on_broken = on_broken
        self.closed = False

    @asynccontextmanager
    async def exchange(
        self, request_id: str, request: JsonObject
    ) -> AsyncGenerator[AsyncIterator[JsonObject] | None]:
        sent = False
        with self._waiting(request_id) as messages:
            self.asked.asked(request_id)
            if not self.closed:
                try:
                    await self.write(json_bytes(request) + b"\n")
                    sent = True
                except _Broken:
                    pass
            yield messages if sent else None

    async def post(self, message: JsonObject) -> None:
        try:
            await self.write(json_bytes(message) + b"\n")
        except _Broken:
            log.debug("could not send %s: the server's stdin is closed", message.get("method"))

    async def write(self, data: bytes) -> None:
        """Write `data` (whole lines). Raises `_Broken`, and ends the session then: a server
        that no longer reads its stdin can take no request (the SDK's writer does the same)."""
        try:
            async with self._lock:
                await self._stdin.send(data)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError) as exc:
            self._on_broken()
            raise _Broken from exc

    def take(self, line: bytes) -> bool:
        """Hand `line` to the request it belongs to; False when it is not one of theirs."""
        if not self._waiters:
            return False
        try:
            message = _read_line(line)
        except TooDeep as exc:  # the request it answers fails, not the connection
            return self._unreadable(exc)
        except ValueError:
            return False
        if not isinstance(message, dict):
            return False
        message = cast(JsonObject, message)
        if "method" not in message:
            key = message.get("id")
        elif message["method"] == "notifications/progress":
            params = message.get("params")
            key = (
                cast(JsonObject, params).get("progressToken") if isinstance(params, dict) else None
            )
        else:
            return False
        waiter = self._waiters.get(key) if isinstance(key, str) else None
        if waiter is None:
            return False
        waiter.put(message)  # unbounded: one slow caller must not hold the pipe
        return True

    def _unreadable(self, exc: TooDeep) -> bool:
        """Hand a line too deep to read to the request it answers (its id read from its top
        level, `TooDeep.top`); False when it answers none of theirs."""
        key = exc.answers()
        waiter = self._waiters.get(key) if isinstance(key, str) else None
        if waiter is None:
            return False
        waiter.fail(exc)
        return True

    def cut(self, key: str | int, error: AnswerTooLarge) -> bool:
        """Fail the request `key` whose answer was over the limit; False when it is none of
        theirs."""
        waiter = self._waiters.get(key) if isinstance(key, str) else None
        if waiter is None:
            return False
        waiter.fail(error)
        return True

    def close(self) -> None:
        """No more messages: every waiter's end after what it already has."""
        self.closed = True
        for waiter in self._waiters.values():
            waiter.end()

    @contextmanager
    def _waiting(self, request_id: str) -> Generator[_Waiter]:
        waiter = self._waiters[request_id] = _Waiter(self._feed)
        try:
            yield waiter
        finally:
            del self._waiters[request_id]


@dataclass(frozen=True, slots=True)
class StampedPipe:
    """A 2026-07-28 connection's `Pipe`: each request and notification stamped as the node's
    SDK session stamps its own (the `_meta` envelope; a pipe has no headers)."""

    pipe: Pipe
    stamp: Callable[[JsonObject, Any], None]

    def exchange(
        self, request_id: str, request: JsonObject
    ) -> AbstractAsyncContextManager[AsyncIterator[JsonObject] | None]:
        self.stamp(request, {})
        return self.pipe.exchange(request_id, request)

    async def post(self, message: JsonObject) -> None:
        if "method" in message:  # an answer of ours carries no envelope
            self.stamp(message, {})
        await self.pipe.post(message)


class StdioLink:
    """Where a stdio connection's `Pipe` is, while its transport is open, and how its server
    exited, once it has."""

    def __init__(self) -> None:
        self.pipe: Pipe | None = None
        self.exit_status: int | None = None
        """The server's exit status (negative: the signal that ended it), once its stdout
        ended and it exited on its own."""

    def how_it_ended(self) -> str:
        """`exit_status` in words for an error (empty while unknown)."""
        status = self.exit_status
        if status is None:
            return ""
        if status < 0:
            with suppress(ValueError):
                return f"; it was killed by {signal.Signals(-status).name}"
            return f"; it was killed by signal {-status}"
        return f"; it exited with status {status}"


@asynccontextmanager
async def open_stdio(
    server: StdioServerParameters,
    errlog: TextIO,
    link: StdioLink,
    node_log: logging.Logger = log,
    max_line_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncGenerator[TransportStreams]:
    """The SDK's `stdio_client(server, errlog)` (UTF-8 only), with the `Pipe` on `link`;
    `node_log` hears of stdout lines that are not JSON-RPC, or longer than `max_line_bytes`,
    and of answers with an id no request has (`AskedIds`)."""
    server = launchable(server)  # in an ASCII locale too
    command = await _get_executable_command(server.command)
    env = get_default_environment() | (server.env or {})
    process = await started(command, server, env, errlog)
    # As the SDK: no awaits from the spawn until the task group, or a cancellation delivered
    # in the gap would leak the live process.
    assert process.stdin is not None
    assert process.stdout is not None
    stdout = process.stdout
    read_send, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    read_stream = _SessionFeed(session_reads)
    write_stream, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    # The server may still be alive when its stdin breaks: the session must see the
    # connection end rather than wait for ever on a request that was never written.
    pipe = Pipe(process.stdin, read_stream, read_send.close, AskedIds(node_log))
    # POSIX: its process group is ended whole, whenever it stops (Windows: the SDK's job object)
    group = ServerGroup(process) if isinstance(process, PipedProcess) else None
    shutting_down = False
    writer_done = anyio.Event()
    stray = StrayLines(node_log, max_line_bytes)

    async def dropped(line: OverLong) -> None:
        """A line over the limit ended: said, and the request it answers told."""
        key = line.answers()
        stray.too_long(line.size, answers=key is not None)
        if key is None or pipe.cut(key, AnswerTooLarge(max_line_bytes, line.size)):
            return
        read_stream.handed += 1
        message = SessionMessage(too_long_error(key, line.size, max_line_bytes))
        with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            await read_send.send(message)  # the session gone: nobody waits for it

    async def read_stdout() -> None:
        try:
            async with read_send:
                try:
                    parts: list[bytes] = []
                    held = 0  # the bytes in `parts`
                    dropping: OverLong | None = None  # the line coming in: over the limit
                    while True:
                        try:
                            chunk = await stdout.receive(_READ_SIZE)
                        except anyio.EndOfStream:
                            if not shutting_down:  # it ended on its own: say how, if it did
                                await _note_exit(process, link)
                            return
                        start = 0
                        while (end := chunk.find(b"\n", start)) >= 0:
                            line = chunk[start:end]
                            start = end + 1
                            if dropping is not None:
                                dropping.add(line)
                                await dropped(dropping)
                                dropping = None
                                continue
                            if parts:
                                line = b"".join([*parts, line])
                                parts, held = [], 0
                            if len(line) > max_line_bytes:
                                whole = OverLong()
                                whole.add(line)
                                await dropped(whole)
                                continue
                            if pipe.take(line):
                                continue
                            message = _session_message(line)
                            if message is None:
                                stray.note(line)
                                continue
                            if isinstance(message.message, JSONRPCResponse | JSONRPCError):
                                pipe.asked.answered(message.message.id)
                            read_stream.handed += 1
                            try:
                                await read_send.send(message)
                            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                                return  # the session is gone; only the drain below remains
                        if start < len(chunk) and dropping is not None:
                            dropping.add(chunk[start:])
                        elif start < len(chunk):
                            parts.append(chunk[start:])
                            held += len(chunk) - start
                            if held > max_line_bytes:
                                dropping = OverLong()
                                for part in parts:
                                    dropping.add(part)
                                parts, held = [], 0
                finally:
                    pipe.close()
                    await _drain_stdout(process)
        except anyio.ClosedResourceError:
            pass  # our own shutdown closed stdout under the read
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                log.exception("reading the MCP server's stdout failed mid-session")

    async def write_stdin() -> None:
        try:
            async with write_receive:
                async for message in write_receive:
                    if isinstance(message.message, JSONRPCRequest):
                        pipe.asked.asked(message.message.id)
                    data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await pipe.write(data.encode() + b"\n")
        except (_Broken, anyio.ClosedResourceError, anyio.BrokenResourceError):
            read_send.close()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        # The SDK's order: unblock the reader into its drain (a server stuck writing stdout
        # cannot read stdin), let the writer flush for a moment, stop the server, release.
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(_WRITER_FLUSH_SECONDS):
            await writer_done.wait()
        await (_stop_server_process(process) if group is None else group.stop())
        await read_stream.aclose()
        await _aclose_all(write_stream, read_send, write_receive)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(read_stdout)
        tg.start_soon(write_stdin)
        if group is not None:
            tg.start_soon(group.watch)
        link.pipe = pipe
        try:
            yield read_stream, write_stream
        finally:
            link.pipe = None
            shutting_down = True
            with anyio.CancelScope(shield=True):  # every wait inside is bounded
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()


async def _note_exit(process: Process | FallbackProcess, link: StdioLink) -> None:
    """Put the server's exit status on `link`, waiting a moment for it: a server's stdout
    ends as it exits, and the calls it leaves unanswered say how it ended."""
    with anyio.move_on_after(_EXIT_WAIT_SECONDS):
        link.exit_status = await process.wait()


def _session_message(line: bytes) -> SessionMessage | None:
    """A line for the session, parsed as the SDK's reader does; None if it is no JSON-RPC
    message (the SDK would hand the session its error, to be logged again with no more said).
    A lone UTF-16 surrogate (JSON's `"\\ud800"`), which the SDK's reader refuses, so that the
    request it answers would wait for its timeout, is read as U+FFFD (`well_formed`); for the
    same reason an answer nested too deeply is that request's error (`nesting`), and bytes that
    are not UTF-8 are read as U+FFFD (`_read_line`)."""
    adapter = mcp_types.jsonrpc_message_adapter
    try:
        return SessionMessage(adapter.validate_json(line, by_name=False))
    except ValueError:
        pass
    try:
        value = well_formed(_read_line(line))
        return SessionMessage(adapter.validate_python(value, by_name=False))
    except TooDeep as exc:
        return _too_deep_answer(exc)
    except ValueError:  # not JSON-RPC after all
        return None


def _read_line(line: bytes) -> Any:
    """`read_json(line)`, bytes that are not UTF-8 read as U+FFFD: the answer is the call's,
    which would otherwise wait for its timeout (the SDK's reader, strict by default, ends the
    connection then; its `encoding_error_handler="replace"` reads it so too)."""
    try:
        return read_json(line)
    except UnicodeDecodeError:
        return read_json(line.decode("utf-8", "replace"))


def _too_deep_answer(exc: TooDeep) -> SessionMessage | None:
    """An error answer, for the session, to the request a message too deep to read answers
    (`TooDeep.top` has its id); None for a message that answers none."""
    key = exc.answers()
    if key is None:
        return None
    message = f"a result {exc.in_message()}"  # "a result nested too deeply (N levels; ...)"
    said = mcp_types.ErrorData(code=mcp_types.INTERNAL_ERROR, message=message)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=key, error=said))


def too_deep_answer(error: mcp_types.ErrorData) -> bool:
    """Whether `error` is what the session was given for an answer too deep to read."""
    return error.code == mcp_types.INTERNAL_ERROR and error.message.startswith(
        "a result nested too deeply ("
    )
