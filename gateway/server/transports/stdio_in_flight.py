"""What is in flight on a stdio connection (`stdio`): the client's requests the server has
not answered yet, and the server's requests to the client that wait on its answer.

The end of the client's input (stdin closed) ends neither the server nor its calls: every
request read is still answered. But nothing the client might answer can arrive any more, so a
call that waits on its answer (a sampling agent's model turn, an approval, a server's question
relayed) would wait for as long as the question's own wait lasts, and the server with it. So
each request to the client still waiting then is answered for it (`CLOSED_INPUT`, as the SDK
answers a request on a closed connection), and so is each the server asks after (never
written): the call goes on without the answer, or ends saying why.
"""

from __future__ import annotations

from typing import Any, cast

import anyio
import mcp_types as types
from mcp.shared.dispatcher import coerce_request_id

__all__ = ["CLOSED_INPUT", "OPEN_ENDED", "Asked", "Unanswered", "id_key"]

JsonObject = dict[str, Any]
OPEN_ENDED = frozenset({"subscriptions/listen"})
"""Requests answered only when their stream ends: a client that closes stdin stopped them."""
CLOSED_INPUT = types.ErrorData(code=types.CONNECTION_CLOSED, message="the client closed its input")
"""The answer of a request to a client that closed stdin: it can answer nothing more."""


class Unanswered:
    """The client's requests the server has not answered yet, by id: one whose id is still in
    flight is refused (its answer could not be told from the first one's)."""

    def __init__(self) -> None:
        self._ids: dict[object, JsonObject] = {}  # request ids: the request
        self._open: set[object] = set()  # open-ended requests' ids (`OPEN_ENDED`)
        self._none_left: anyio.Event | None = None
        self._client_gone = False
        self._counting = False
        self.last_ended = 0.0
        """When the last request was answered, once `counting` (the server stops)."""

    @property
    def in_flight(self) -> int:
        return len(self._ids)

    def count(self) -> None:
        """Note when each request is answered from now on (`draining.Quiets`)."""
        self._counting = True
        self.heard()

    def heard(self) -> None:
        """Something ended now: the quiet period starts again."""
        self.last_ended = anyio.current_time()

    async def quiet(self, period: float) -> None:
        """Return once no request has been unanswered for `period` seconds."""
        while True:
            await self.all_answered()
            left = self.last_ended + period - anyio.current_time()
            if left <= 0:
                return
            await anyio.sleep(left)  # a request may come meanwhile: looked at again

    def read(self, message: JsonObject) -> bool:
        """Note a message the client sent (checked by `decode_message`): False for a request
        whose id is still in flight, which must not run."""
        method = message.get("method")
        if method is None:
            return True
        if "id" in message:
            key = message["id"]
            if type(key) is str:  # an int (the usual id) is its own key
                key = id_key(key)
            if key in self._ids or (self._open and key in self._open):
                return False
            if method in OPEN_ENDED:
                self._open.add(key)
            else:
                self._ids[key] = message
        elif method == "notifications/cancelled":
            # A cancelled request may never be answered (the spec: it SHOULD NOT be).
            params = message.get("params")
            if isinstance(params, dict):
                self.settle(cast(JsonObject, params).get("requestId"))
        return True

    def settle(self, request_id: object, request: JsonObject | None = None) -> None:
        """The request `request_id` is answered (or ended unanswered, as the server would);
        only if it is still `request`, when given: one cancelled may be ended after its id
        was taken again."""
        key = id_key(request_id) if type(request_id) is str else request_id
        if request is not None and self._ids.get(key) is not request:
            return
        if self._ids.pop(key, None) is None:
            self._open.discard(key)
        if self._counting:
            self.last_ended = anyio.current_time()
        if not self._ids and self._none_left is not None:
            self._none_left.set()
            self._none_left = None

    def give_up(self) -> None:
        """The client is gone: nothing more can reach it."""
        self._client_gone = True
        self._ids.clear()
        self._open.clear()
        if self._none_left is not None:
            self._none_left.set()
            self._none_left = None

    async def all_answered(self) -> None:
        if self._ids and not self._client_gone:
            if self._none_left is None:  # one for every waiter (a draining server's, too)
                self._none_left = anyio.Event()
            await self._none_left.wait()


def id_key(request_id: object) -> object:
    """The id as the SDK tells requests apart: "7" and 7 are one (`coerce_request_id`)."""
    return coerce_request_id(request_id) if isinstance(request_id, str) else request_id


class Asked:
    """The server's requests to the client that wait on its answer, by id, until the client's
    input ends (`end`): from then on none is noted (`asks` is False)."""

    def __init__(self) -> None:
        self._ids: dict[object, types.RequestId] = {}  # id_key: the id as written
        self.ended = False

    def asks(self, request_id: types.RequestId) -> bool:
        """Note a request about to be written to the client: False once its input has ended,
        when no answer could come (it must be answered now, and not written)."""
        if self.ended:
            return False
        self._ids[id_key(request_id)] = request_id
        return True

    def answered(self, request_id: object) -> None:
        """The client answered `request_id` (a result or an error)."""
        if isinstance(request_id, int | str):
            self._ids.pop(id_key(request_id), None)

    def end(self) -> list[types.RequestId]:
        """The client's input ended: the requests still waiting on it, to answer for it."""
        self.ended = True
        waiting, self._ids = list(self._ids.values()), {}
        return waiting
