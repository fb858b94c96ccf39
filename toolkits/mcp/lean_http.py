"""A lean HTTP/1.1 client for one origin: the POSTs of calls passed through (`forward`).

Why not httpx2 here: a call passed through is one POST and one streamed answer, and httpx2's
`AsyncClient.stream` around it (auth flow, hooks, pool, its HTTP/1.1 state machine, a model for
every URL, header set, request and response) was ~27 % of the gateway's samples per call
(py-spy --gil): ~1.1 ms of CPU where the bytes on the wire need ~0.1 ms. `LeanHttp` writes each
request in one write on a kept-alive TCP connection and reads the answer on the connection's
own protocol (`lean_response`: llhttp frames it as it arrives).

It is for where httpx2 adds nothing (`usable`): plain http://, no proxy; its user also leaves
it when an auth flow or cookies are in play (`HttpLink.lean`). A connection goes back to the
small idle pool when its answer was read to the end and may be reused, or when only its rest is
unread: a chunked answer's last chunk often comes a moment after the message the caller waited
for (~0.2 ms from an SDK server), so the connection drains it by itself while the caller goes
on, and the next request waits for that only if it takes the connection before the end came.
A kept connection that fails before any byte of the answer arrived was most likely closed by
the server while idle: the request is sent once more on a new connection (never otherwise: a
POST is not repeated once the server may have acted on it). A host name's addresses are raced
as httpx2 (anyio) races them: the next is tried beside one that has not answered in 0.25 s.

Errors are httpx2's, so callers handle both clients alike: `ConnectError`/`ConnectTimeout`
(nothing was sent), `WriteError`, `ReadError`, `RemoteProtocolError` (an answer broken or not
HTTP/1.1 as we read it). A header value with CR or LF raises `ValueError`. Only connecting has
a timeout here: a cancel scope per read cost ~5 % of a call's CPU, and the caller bounds each
request as a whole anyway (`forward`: the call's deadline, or a cancellation's own limit).
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
import os
import re
import socket
from collections.abc import Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from urllib.parse import urlsplit

import anyio
import httpx2

from .lean_response import Connection, LeanResponse, NothingArrived

__all__ = ["LeanHttp", "LeanResponse"]

_STAGGER = 0.25
"""Seconds before the next address of a host name is tried beside one that has not answered."""
_IDLE_LIMIT = 20
"""Idle connections kept at least (httpx2's default keep-alive pool size); more, up to as many
as were busy at once (at most `_IDLE_CAP`): a gateway's calls to a node under the load of 50
at once closed 30 connections and opened them again, call after call (bench/RESULTS.md, 35)."""
_IDLE_CAP = 256
_HEADS_KEPT = 64
_PROXY_VARS = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class LeanHttp(AbstractAsyncContextManager["LeanHttp"]):
    """POSTs to one `http://` URL with `headers` on every request (per-request ones win)."""

    def __init__(
        self, url: str, headers: Mapping[str, str], *, connect_timeout: float | None = 30.0
    ) -> None:
        if not self.usable(url):
            raise ValueError(f"not a plain http:// URL reachable without a proxy: {url}")
        parts = urlsplit(url)
        self._host, self._port = parts.hostname or "", parts.port or 80
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._request_line = f"POST {target} HTTP/1.1\r\n".encode()
        defaults = {
            "host": parts.netloc,
            "user-agent": "agent-gateway",
            "accept-encoding": "identity",
        }
        self._headers = _checked({**defaults, **{k.lower(): v for k, v in headers.items()}})
        self._heads: dict[tuple[tuple[str, str], ...], bytes] = {}
        """Request heads (but their length) by their per-request headers: a node sends the same
        few sets again and again, and writing one out was ~3 % of a passed-through call."""
        self._connect_timeout = connect_timeout
        self._idle: list[Connection] = []
        """Kept connections, the last one first (some may still drain their last answer)."""
        self._busy: set[Connection] = set()
        self._keep = _IDLE_LIMIT
        """Idle connections kept: `_IDLE_LIMIT`, or as many as were busy at once."""
        self._closed = False
        self.opened = 0
        """Connections opened so far (for tests and the curious)."""

    @staticmethod
    def usable(url: str) -> bool:
        """Whether `url` is plain http:// (no credentials in it) and no proxy is configured."""
        try:
            parts = urlsplit(url)
            _ = parts.port  # raises on a malformed port
        except ValueError:
            return False
        plain = parts.scheme == "http" and bool(parts.hostname) and "@" not in parts.netloc
        return plain and not any(os.environ.get(name) for name in _PROXY_VARS)

    @property
    def idle(self) -> int:
        """Connections kept for the next request."""
        return sum(not conn.closed for conn in self._idle)

    def post(
        self, body: bytes, headers: Mapping[str, str]
    ) -> AbstractAsyncContextManager[LeanResponse]:
        """Send `body`; the response once its head arrived. Leaving the block keeps the
        connection if the answer is (or may still be) read to the end; an error closes it."""
        key = tuple(headers.items())
        head = self._heads.get(key)
        if head is None:
            merged = {**self._headers, **_checked({k.lower(): v for k, v in headers.items()})}
            lines = "".join(f"{name}: {value}\r\n" for name, value in merged.items())
            head = self._request_line + lines.encode("latin-1")
            if len(self._heads) < _HEADS_KEPT:  # a node whose headers vary fills it once
                self._heads[key] = head
        return _Posting(
            self._send, self._finished, b"%bcontent-length: %d\r\n\r\n%b" % (head, len(body), body)
        )

    async def _send(self, request: bytes) -> tuple[Connection, LeanResponse]:
        conn = await self._kept()
        kept = conn is not None
        if conn is None:
            conn = await self._open()
        while True:
            self._busy.add(conn)
            if len(self._busy) > self._keep:
                self._keep = min(len(self._busy), _IDLE_CAP)
            response = conn.start(request)
            try:
                await response.read_head()
                return conn, response
            except NothingArrived as exc:
                self._discard(conn)
                if not kept:
                    raise exc.error from exc.__cause__
                # The server closed its idle end; the older idle ones are closed too, likely.
                for idle in self._take_idle():
                    idle.close()
                kept, conn = False, await self._open()
            except BaseException:
                self._discard(conn)
                raise

    async def _open(self) -> Connection:
        if self._closed:
            raise httpx2.ConnectError("the client is closed")
        try:
            with anyio.fail_after(self._connect_timeout):
                conn = await _connect(self._host, self._port)
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"connecting timed out: {exc}") from exc
        except OSError as exc:
            raise httpx2.ConnectError(str(exc) or repr(exc)) from exc
        self.opened += 1
        return conn

    async def _kept(self) -> Connection | None:
        """A kept connection, its last answer read to the end; None if none is left."""
        while self._idle:
            conn = self._idle.pop()
            if conn.closed:
                continue
            if conn.draining is not None:  # its last answer's rest is still on the way
                self._busy.add(conn)
                try:
                    reusable = await conn.draining
                except BaseException:  # cancelled meanwhile: the connection goes
                    self._discard(conn)
                    raise
                self._busy.discard(conn)
                if not reusable:
                    conn.close()
                    continue
            return conn
        return None

    def _finished(self, conn: Connection, response: LeanResponse, failed: bool) -> None:
        if failed:
            self._discard(conn)
        else:
            self._release(conn, response)

    def _release(self, conn: Connection, response: LeanResponse) -> None:
        self._busy.discard(conn)
        if response.unread:
            conn.drain()
        elif not conn.reusable:
            conn.close()
            return
        if self._closed or len(self._idle) >= self._keep:
            conn.close()
        else:
            self._idle.append(conn)

    def _discard(self, conn: Connection) -> None:
        self._busy.discard(conn)
        conn.close()

    def _take_idle(self) -> list[Connection]:
        idle, self._idle = self._idle, []
        return idle

    async def aclose(self) -> None:
        """Close every connection, those of responses being read too (their reads fail)."""
        self._closed = True
        busy, self._busy = list(self._busy), set[Connection]()
        for conn in self._take_idle() + busy:
            conn.close(httpx2.ReadError("the client is closed"))

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()


class _Posting:
    """`LeanHttp.post`'s block (a class: a generator's block costs more, on every call)."""

    __slots__ = ("_finished", "_request", "_send", "_sent")

    def __init__(
        self,
        send: Callable[[bytes], Awaitable[tuple[Connection, LeanResponse]]],
        finished: Callable[[Connection, LeanResponse, bool], None],
        request: bytes,
    ) -> None:
        self._send = send
        self._finished = finished
        self._request = request
        self._sent: tuple[Connection, LeanResponse] | None = None

    async def __aenter__(self) -> LeanResponse:
        self._sent = await self._send(self._request)
        return self._sent[1]

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        assert self._sent is not None
        self._finished(*self._sent, kind is not None)


async def _connect(host: str, port: int) -> Connection:
    """A connection to the first of `host`'s addresses that answers, the next one tried beside
    each that has not answered within `_STAGGER` (happy eyeballs, RFC 8305; uvloop has none)."""
    loop = asyncio.get_running_loop()
    addresses = await _addresses(host, port)
    winner: Connection | None = None
    errors: list[OSError] = []
    async with anyio.create_task_group() as tg:

        async def attempt(address: str, failed: anyio.Event) -> None:
            nonlocal winner
            try:
                _, conn = await loop.create_connection(Connection, address, port)
            except OSError as exc:
                errors.append(exc)
                failed.set()
                return
            if winner is None:
                winner = conn
                tg.cancel_scope.cancel()
            else:  # two answered at once
                conn.close()

        for address in addresses:
            failed = anyio.Event()
            tg.start_soon(attempt, address, failed)
            with anyio.move_on_after(_STAGGER):
                await failed.wait()
    if winner is None:
        if len(errors) == 1:
            raise errors[0]
        raise OSError(f"no address of {host!r} answered: " + "; ".join(map(str, errors)))
    return winner


async def _addresses(host: str, port: int) -> list[str]:
    """`host` if it is an IP address, else its addresses, the families alternating."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        return [host]
    found = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    first = found[0][0]
    ours = [str(info[4][0]) for info in found if info[0] == first]
    others = [str(info[4][0]) for info in found if info[0] != first]
    mixed = [a for pair in itertools.zip_longest(ours, others) for a in pair if a is not None]
    return list(dict.fromkeys(mixed))


_UNSAFE_NAME = re.compile(r"[\r\n\0:]")
_UNSAFE_VALUE = re.compile(r"[\r\n\0]")


def _checked(headers: dict[str, str]) -> dict[str, str]:
    # Two searches over the joined names and values, not two per header: most pass.
    if _UNSAFE_NAME.search("".join(headers)) or _UNSAFE_VALUE.search("".join(headers.values())):
        for name, value in headers.items():
            if _UNSAFE_NAME.search(name) or _UNSAFE_VALUE.search(value):
                raise ValueError(f"header {name!r} holds a line break, NUL or colon")
    return headers
