"""A server told to stop (`serve --http`, `serve --stdio`): the calls in flight finish, and
what their clients ask next is answered.

A client whose call ends during the grace often asks again at once: the mcp SDK's `Client`
lists the tools after a result (to check it against the tool's output schema) when it never
listed them, and dies of a refused connection (over stdio, of a closed one). So while it
stops, the server answers every request as before but a new call, which gets an error result
saying the gateway is shutting down (`Drains.refuse_calls`, `SHUTTING_DOWN`); HTTP sessions
stay open. It stops taking requests once the calls in flight have ended and their clients
have been quiet for `FOLLOW_UP` seconds (`drained`), or when `SHUTDOWN_GRACE` ends; the calls
still running then are answered with an error result (`EndsCalls`, `CUT_OFF`), and what their
clients ask next is answered as before, until they are quiet (`wind_down`).

A `--stateless` replica behind a load balancer is told to go in a rolling restart, while the
other replicas serve: there a refused call is a failed call for a client that the balancer
could have sent elsewhere. So it stops listening at once (the balancer's connect is refused,
and it sends the request, a POST too, to another replica), closes its idle connections, and
answers a request that still reaches it (on a connection open before) with 503 and
`Retry-After` (`Requests.refuse`, `LEAVING`), never with a call's error result. The calls in
flight go on as above; their clients' next requests reach another replica.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable
from typing import Protocol, runtime_checkable

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = [
    "ANSWER_SLACK",
    "CUT_OFF",
    "FOLLOW_UP",
    "LEAVING",
    "SESSION_CLOSED",
    "SHUTDOWN_GRACE",
    "SHUTTING_DOWN",
    "Drains",
    "EndsCalls",
    "Quiets",
    "Requests",
    "drained",
    "drained_or_ended",
    "refuse_unavailable",
    "wind_down",
]

UNAVAILABLE = -32000
"""The JSON-RPC error code of a 503's body (a server error: JSON-RPC names none for this)."""
SHUTDOWN_GRACE = 5
"""Seconds the calls in flight get to finish when the server stops."""
ANSWER_SLACK = 2
"""Seconds after the grace for the answers of the calls it ended to go out; then what still
runs is cancelled (unanswered)."""
FOLLOW_UP = 1.0
"""Seconds without a request, after the last call in flight ended, before the server stops
taking requests: the SDK's `Client` lists the tools within milliseconds of a result."""
SHUTTING_DOWN = "agent-gateway is shutting down and takes no new calls."
LEAVING = (
    "this agent-gateway replica is shutting down and takes no new requests: send it again, "
    "another replica takes it."
)
"""Why a request that reaches a leaving replica is refused (503)."""
SESSION_CLOSED = (
    "agent-gateway is shutting down and has closed this session. Call again once the gateway "
    "is back."
)
"""Why a request on a 2025-era session the stopping server closed is refused (503): a 404
would tell its client to initialize again, against a server going away."""
RETRY_AFTER = b"1"
"""Seconds a client refused with 503 waits before it sends the request again (any replica)."""
CUT_OFF = (
    "agent-gateway is shutting down, and the call was still running when its time to finish "
    "ran out."
)


@runtime_checkable
class Drains(Protocol):
    """A server that can refuse new calls while those in flight finish."""

    def refuse_calls(self, why: str) -> None:
        """Answer the calls that begin from now on with an error result saying `why`."""
        ...

    def calls_in_flight(self) -> int: ...

    async def calls_ended(self) -> None:
        """Return once no call is in flight."""
        ...


@runtime_checkable
class EndsCalls(Protocol):
    """A server that can answer the calls it is still running with an error result."""

    def end_calls(self, why: str) -> None: ...


class Quiets(Protocol):
    """A transport's requests in flight, once it counts them (the server stops)."""

    @property
    def in_flight(self) -> int: ...

    def heard(self) -> None:
        """Something ended now: the quiet period starts again."""
        ...

    async def quiet(self, period: float) -> None:
        """Return once no request has been in flight for `period` seconds."""
        ...


class Requests:
    """ASGI: once `counting` (the server stops), counts the HTTP requests in flight and notes
    when the last one ended. Before, and for a GET (an open event stream, which waits for
    nothing), a request gets no frame here: serving pays nothing for the count."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.counting = False
        self.in_flight = 0
        self.last_ended = 0.0
        self._idle: anyio.Event | None = None
        self._refusal: tuple[bytes, bytes] | None = None
        """The bodies of the 503 a POST gets once refused: to /mcp, to the rest (`/v1/`)."""

    def count(self) -> None:
        """Count from now on (what began before is a call, counted by the server, or a
        request about to end)."""
        self.counting = True
        self.heard()

    def heard(self) -> None:
        """Something ended now: the quiet period starts again."""
        self.last_ended = anyio.current_time()

    def refuse(self, why: str) -> None:
        """Once `counting`, answer every POST that begins (a new request: a call, a listing,
        a chat completion) with 503, `Retry-After` and `Connection: close`, saying `why`: a
        replica leaving, whose requests another replica takes."""
        mcp = _error(why)
        openai = {"error": {"message": why, "type": "server_error", "code": "unavailable"}}
        self._refusal = (json.dumps(mcp).encode(), json.dumps(openai).encode())

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if not self.counting or scope["type"] != "http" or scope["method"] == "GET":
            return self.app(scope, receive, send)
        return self._counted(scope, receive, send)

    async def _counted(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._refusal is not None and scope["method"] == "POST":
            mcp, other = self._refusal
            await _unavailable(send, other if scope["path"].startswith("/v1/") else mcp)
            return
        self.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.in_flight -= 1
            self.last_ended = anyio.current_time()
            if not self.in_flight and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def quiet(self, period: float) -> None:
        """Return once no request has been in flight for `period` seconds."""
        while True:
            while self.in_flight:
                if self._idle is None:
                    self._idle = anyio.Event()
                await self._idle.wait()
            left = self.last_ended + period - anyio.current_time()
            if left <= 0:
                return
            await anyio.sleep(left)  # a request may come meanwhile: looked at again


def refuse_unavailable(send: Send, why: str) -> Awaitable[None]:
    """Answer a request to `/mcp` with 503, `Retry-After` and a JSON-RPC error saying `why`."""
    return _unavailable(send, json.dumps(_error(why)).encode())


def _error(why: str) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": UNAVAILABLE, "message": why}}


async def _unavailable(send: Send, body: bytes) -> None:
    # The body is not read: the connection closes after the answer.
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"retry-after", RETRY_AFTER),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def drained(server: Drains, requests: Quiets, follow_up: float = FOLLOW_UP) -> None:
    """Return once the server's calls in flight have ended, and, if any call or request was
    in flight, their clients have been quiet for `follow_up` seconds."""
    if server.calls_in_flight() or requests.in_flight:
        await _followed_up(server, requests, follow_up)


async def _followed_up(server: Drains, requests: Quiets, follow_up: float) -> None:
    await server.calls_ended()
    requests.heard()  # the last call's end: its client's follow-up comes within the period
    await requests.quiet(follow_up)


async def drained_or_ended(
    server: Drains, requests: Quiets, ended: anyio.Event, follow_up: float = FOLLOW_UP
) -> None:
    """`drained`, or sooner once `ended` is set (the transport stopped on its own)."""
    await _or_ended(drained(server, requests, follow_up), ended)


async def wind_down(
    server: Drains,
    requests: Quiets,
    ended: anyio.Event,
    *,
    grace: float,
    follow_up: float = FOLLOW_UP,
    told: bool,
) -> None:
    """`drained_or_ended` within `grace` seconds; then a server that `EndsCalls` answers the
    calls still running with an error result (`CUT_OFF`), and, if there were any, what their
    clients ask next is answered as during the grace (a new call: "takes no new calls") until
    they are quiet for `follow_up` seconds (within `ANSWER_SLACK`): only then may the
    transport stop. (A 2025-era session closed as its call's cut-off result went out; its
    client's next call got 404, which tells it to initialize again.) `told` (to stop): a
    cancel cuts the waits short (a second signal); else they are shielded (ours to give)."""
    cut = False
    try:
        with anyio.CancelScope(shield=not told), anyio.move_on_after(grace):
            await drained_or_ended(server, requests, ended, follow_up)
    finally:
        if isinstance(server, EndsCalls):
            cut = server.calls_in_flight() > 0
            server.end_calls(CUT_OFF)
    if cut:
        with anyio.CancelScope(shield=not told), anyio.move_on_after(ANSWER_SLACK):
            await _or_ended(_followed_up(server, requests, follow_up), ended)


async def _or_ended(waited: Awaitable[object], ended: anyio.Event) -> None:
    """`await waited`, or return sooner once `ended` is set."""
    async with anyio.create_task_group() as waits:
        waits.start_soon(_then_cancel, waited, waits.cancel_scope)
        waits.start_soon(_then_cancel, ended.wait(), waits.cancel_scope)


async def _then_cancel(waited: Awaitable[object], scope: anyio.CancelScope) -> None:
    await waited
    scope.cancel()
