"""The JSON-RPC envelope of every message a client sends, checked before the SDK sees it.

Both transports answer a message that is not JSON-RPC with a short error and nothing of the
input but its id: `-32700 Parse error` for bytes that are not UTF-8 JSON, `-32600 Invalid
Request` for JSON that is not one JSON-RPC 2.0 message (a batch, a bool or float id, a method
that is not a string, ...), `-32602 Invalid params` for a request whose progress token is not
a string or an integer. The id is echoed only when it is a valid one, as JSON-RPC asks;
otherwise it is null. Without this the SDK (mcp 2.3.0) answers 2025-era HTTP requests with a
pydantic dump of the input, treats a request with a bool/float/array id as a notification
(202 and no answer ever), and drops bad stdio lines in silence.

check_message(data) -> the typed message, or a `Refusal` saying why not
decode_message(data) -> the message as JSON, checked as `check_message` checks it (no model)
typed_message(obj)  -> a decoded message as the SDK's model
too_long(head, cap) -> the refusal of a message longer than `cap` bytes, from its first bytes
duplicate_id(id)   -> the refusal of a request whose id is still in flight on its connection
EnvelopeCheck       -> ASGI wrapper answering refused HTTP POST bodies with 400 (413: too long,
                       415: not JSON, by its Content-Type in any case); a client gone before
                       its body was whole gets nothing (one DEBUG line)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, cast

import mcp_types as types
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from toolkits import read_json

from .request_headers import by_name, first

__all__ = [
    "HEAD_BYTES",
    "EnvelopeCheck",
    "Refusal",
    "buffered_body",
    "check_message",
    "decode_message",
    "duplicate_id",
    "is_modern_post",
    "posted_method",
    "posted_object",
    "posted_request_id",
    "refuse",
    "too_long",
    "typed_message",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a message is not JSON-RPC: the error to answer it with."""

    code: int
    message: str
    id: types.RequestId | None = None
    data: dict[str, Any] | None = None

    def error(self) -> types.JSONRPCError:
        data = types.ErrorData(code=self.code, message=self.message, data=self.data)
        return types.JSONRPCError(jsonrpc="2.0", id=self.id, error=data)

    def body(self) -> bytes:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        body = {"jsonrpc": "2.0", "id": self.id, "error": error}
        return json.dumps(body, separators=(",", ":")).encode()


def check_message(data: bytes) -> types.JSONRPCMessage | Refusal:
    """One JSON-RPC 2.0 message as MCP uses it (params and results are objects), or why not."""
    decoded = decode_message(data)
    return decoded if isinstance(decoded, Refusal) else typed_message(decoded)


def decode_message(data: bytes) -> dict[str, Any] | Refusal:
    """`check_message` without the model: the message's JSON object, or why it is not one."""
    decoded = _decoded(data)
    if isinstance(decoded, Refusal):
        return decoded
    return _refusal(decoded) or cast(dict[str, Any], decoded)


def _decoded(data: bytes) -> Any | Refusal:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Refusal(types.PARSE_ERROR, "Parse error: not UTF-8")
    try:
        # NaN and Infinity are Python's, not JSON's. Too many digits is a ValueError, deep
        # nesting a RecursionError.
        return read_json(text, constants=False)
    except (ValueError, RecursionError):
        return Refusal(types.PARSE_ERROR, "Parse error: not valid JSON")


def _refusal(decoded: Any) -> Refusal | None:
    """Why `decoded` is not one JSON-RPC message as MCP uses it; None if it is one. What this
    lets through the SDK's models take too (`typed_message`; tests/server/test_envelope_models.py),
    so the HTTP layer needs no model: the SDK validates the message when it serves it."""
    if isinstance(decoded, list):
        return _invalid("batches are not supported")
    if not isinstance(decoded, dict):
        return _invalid("expected a JSON-RPC object")
    message = cast(dict[str, Any], decoded)
    request_id = message.get("id")
    valid_id = _is_id(request_id)
    if "id" in message and not valid_id and not (request_id is None and "error" in message):
        return _invalid("id must be a string or an integer")
    echo = cast(types.RequestId, request_id) if valid_id else None
    why = _envelope_fault(message)
    if why is not None:
        return _invalid(why, echo)
    # A request's progress token MUST be a string or an integer (the spec). The SDK's models
    # refuse another one with a bare "Invalid request parameters", but a pass-through would
    # take `true` and send it back in every progress notification. (No id: a notification,
    # never answered.)
    params = message.get("params")
    if echo is None or type(params) is not dict:
        return None
    meta = cast(dict[str, Any], params).get("_meta")
    if type(meta) is not dict or "progressToken" not in meta:
        return None
    if _is_id(cast(dict[str, Any], meta)["progressToken"]):
        return None
    why = "Invalid params: _meta.progressToken must be a string or an integer"
    return Refusal(types.INVALID_PARAMS, why, echo)


def typed_message(message: dict[str, Any]) -> types.JSONRPCMessage | Refusal:
    """A message `decode_message` gave, as the SDK's model (or why the model refuses it)."""
    try:
        return types.jsonrpc_message_adapter.validate_python(message, by_name=False)
    except ValidationError:  # whatever the SDK's models add; their dump would echo the input
        request_id = message.get("id")
        echo = cast(types.RequestId, request_id) if _is_id(request_id) else None
        return _invalid("not a JSON-RPC request, notification or response", echo)


HEAD_BYTES = 4096
"""How much of an over-long message is read for its id: a client writes the id before the
params (every SDK does), and no more than this is parsed of a message never taken."""


def too_long(head: bytes | bytearray, limit: int) -> Refusal:
    """The refusal of a message longer than `limit` bytes, of which `head` are the first: the
    id echoed when a member of the object's first 4 kB gives a valid one."""
    return _invalid(f"the message is longer than {limit} bytes", _leading_id(head[:HEAD_BYTES]))


def duplicate_id(request_id: types.RequestId | None) -> Refusal:
    """The refusal of a request whose id is still in flight on its connection."""
    return _invalid(
        "a request with this id is still in flight on this session; give each request its own id",
        request_id,
    )


def _leading_id(head: bytes | bytearray) -> types.RequestId | None:
    """The `id` of the JSON object `head` starts, if it comes (whole) in `head`."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:  # a character cut at the end (or no UTF-8 at all)
        text = head[: exc.start].decode("utf-8")
    decoder = json.JSONDecoder()
    pos = _skip_space(text, 0)
    if not text.startswith("{", pos):
        return None
    try:
        while True:
            pos = _skip_space(text, pos + 1)
            key, pos = decoder.raw_decode(text, pos)
            pos = _skip_space(text, pos)
            if not isinstance(key, str) or not text.startswith(":", pos):
                return None
            value, pos = decoder.raw_decode(text, _skip_space(text, pos + 1))
            if key == "id":
                return cast(types.RequestId, value) if _is_id(value) else None
            pos = _skip_space(text, pos)
            if not text.startswith(",", pos):
                return None
    except (ValueError, RecursionError):  # cut off by `head`'s end, or not JSON
        return None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _is_id(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _invalid(why: str, request_id: types.RequestId | None = None) -> Refusal:
    return Refusal(types.INVALID_REQUEST, f"Invalid Request: {why}", request_id)


def _envelope_fault(message: dict[str, Any]) -> str | None:
    if message.get("jsonrpc") != "2.0":
        return 'jsonrpc must be "2.0"'
    if "method" in message:
        if not isinstance(message["method"], str):
            return "method must be a string"
        if "params" in message and not isinstance(message["params"], dict):
            return "params must be an object"
        if "result" in message or "error" in message:
            return "a request has no result or error"
        return None
    if "id" not in message:
        return "expected a method, or an id with a result or an error"
    if ("result" in message) == ("error" in message):
        return "a response has either a result or an error"
    if "result" in message and not isinstance(message["result"], dict):
        return "result must be an object"
    if "error" in message:
        error = message["error"]
        if not isinstance(error, dict):
            return "error must be an object"
        fields = cast(dict[str, Any], error)
        code = fields.get("code")
        if not isinstance(code, int) or isinstance(code, bool):
            return "error.code must be an integer"
        if not isinstance(fields.get("message"), str):
            return "error.message must be a string"
    return None


class EnvelopeCheck:
    """ASGI wrapper: a POST body that is not one JSON-RPC message gets a 400 with its error, one
    longer than `max_body_bytes` a 413 (at once when its Content-Length says so).

    Everything else reaches `app` as it came, the body replayed unchanged. Other methods pass
    unread: the SDK's endpoint bounds their bodies.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    def __call__(self, scope: Scope, receive: Receive, send: Send) -> Awaitable[None]:
        if scope["type"] != "http" or scope["method"] != "POST":
            return self.app(scope, receive, send)  # no frame here while a stream is open
        return self._check(scope, receive, send)

    async def _check(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = by_name(scope) or _first_of_each(scope)  # read once: this runs every call
        kind = headers.get(b"content-type")
        if kind != b"application/json" and not _json_kind(scope, kind):  # the first: the usual
            await _answer(send, _NOT_JSON, 415)
            return
        try:
            if _declared_length(headers.get(b"content-length")) > self.max_body_bytes:
                raise _TooLarge(b"")  # refused unread: its id is not known
            body, replay = await _buffered(receive, self.max_body_bytes)
        except _TooLarge as exc:
            # 413, as the SDK's limit, with the JSON-RPC error stdio answers (the id echoed
            # when the body's first 4 kB give it).
            await _answer(send, too_long(exc.head, self.max_body_bytes), 413)
            return
        if body is None:
            # Nobody to answer; the SDK would log a ClientDisconnect traceback at ERROR.
            log.debug("an HTTP client went away before its request's body was whole")
            return
        decoded = _decoded(body)
        refused = decoded if isinstance(decoded, Refusal) else _refusal(decoded)
        if refused is not None:
            await _answer(send, refused)
            return
        version = headers.get(_VERSION)
        if version is not None and version not in _HANDSHAKE_VERSIONS:
            refused = _version_refusal(scope, cast(dict[str, Any], decoded), version)
            if refused is not None:
                await _answer(send, refused)
                return
        scope[_POSTED] = (body, decoded)  # a JSON-RPC object: the layers after read it here
        try:
            await self.app(scope, replay, send)
        finally:
            replay.release()  # the SDK may keep the request (see `_Replay`)


_VERSION = b"mcp-protocol-version"
_HANDSHAKE_VERSIONS = frozenset(v.encode() for v in HANDSHAKE_PROTOCOL_VERSIONS)
_MODERN_ENVELOPE = "io.modelcontextprotocol/protocolVersion"


def _version_refusal(scope: Scope, message: dict[str, Any], version: bytes) -> Refusal | None:
    """-32022 for a 2025-era request whose MCP-Protocol-Version header names a version it
    cannot carry. The SDK routes any such header to its 2026-07-28 path, which told the client
    of an envelope it never meant to send ('params._meta must be an object carrying...').

    A 2025-era request is one without the 2026-07-28 envelope that is on a session, or an
    `initialize`, or names a version unknown to either era; anything else (a 2026-07-28
    request) is the SDK's to judge.
    """
    request_id = message.get("id")
    params = message.get("params")
    meta = cast(dict[str, Any], params).get("_meta") if isinstance(params, dict) else None
    if not _is_id(request_id) or (isinstance(meta, dict) and _MODERN_ENVELOPE in meta):
        return None
    requested = version.decode("latin-1")
    supported: list[str] = list(HANDSHAKE_PROTOCOL_VERSIONS)
    if first(scope, b"mcp-session-id") is not None:
        why = _ON_A_SESSION
    elif message.get("method") == "initialize":
        why = "initialize opens a session of one of these versions"
    elif requested not in MODERN_PROTOCOL_VERSIONS:
        why = "no version of that name is served"
        supported += MODERN_PROTOCOL_VERSIONS
    else:
        return None  # a 2026-07-28 request without its envelope: the SDK says so
    return Refusal(
        types.UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version in the MCP-Protocol-Version header: {why} (data.supported)",
        cast(types.RequestId, request_id),
        {"supported": supported, "requested": requested[:_ECHOED_VERSION]},
    )


_ECHOED_VERSION = 40
"""Characters of a version header echoed: enough for any version, not a client's essay."""
_ON_A_SESSION = "a request on a session carries the session's version"


def other_version(scope: Scope, version: bytes, session_version: str) -> Refusal:
    """-32022 for a request on a session whose MCP-Protocol-Version header names a version
    other than the session's (the spec: 400); the SDK took any version it serves."""
    return Refusal(
        types.UNSUPPORTED_PROTOCOL_VERSION,
        f"Unsupported protocol version in the MCP-Protocol-Version header: {_ON_A_SESSION} "
        "(data.supported)",
        posted_request_id(scope),
        {"supported": [session_version], "requested": version.decode("latin-1")[:_ECHOED_VERSION]},
    )


def negotiated_version(scope: Scope) -> str | None:
    """The version the `initialize` this POST carries opens its session at, as the SDK
    negotiates it (the version asked for if served, else the latest); None for anything else."""
    kept: tuple[bytes, Any] | None = scope.get(_POSTED)
    message: object = kept[1] if kept is not None else None
    if not isinstance(message, dict):
        return None
    message = cast(dict[str, Any], message)
    if message.get("method") != "initialize":
        return None
    params = message.get("params")
    asked = (
        cast(dict[str, Any], params).get("protocolVersion") if isinstance(params, dict) else None
    )
    if not isinstance(asked, str):
        return None  # refused: no session opens
    return asked if asked in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION


_NOT_JSON = Refusal(
    types.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"
)


def _json_kind(scope: Scope, kind: bytes | None) -> bool:
    """Whether a Content-Type names JSON; if it does in capitals, it is put in lowercase for
    the SDK, whose checks are case-sensitive (media types are not: RFC 9110)."""
    if kind is None:
        return False
    lowered = kind.lower()
    if lowered.split(b";", 1)[0].split(b",", 1)[0].strip() != b"application/json":
        return False
    if lowered != kind:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        scope["headers"] = [(k, lowered if k == b"content-type" else v) for k, v in headers]
    return True


class _TooLarge(Exception):
    """The body is longer than the limit; `head`: its first bytes read."""

    def __init__(self, head: bytes) -> None:
        super().__init__()
        self.head = head


def _first_of_each(scope: Scope) -> dict[bytes, bytes]:
    """Each header's first value, when `by_name` cannot give them (a name repeated)."""
    found: dict[bytes, bytes] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.lower(), value)
    return found


def _declared_length(value: bytes | None) -> int:
    if value is not None:
        with suppress(ValueError):
            return int(value)
    return 0


async def buffered_body(receive: Receive) -> tuple[bytes | None, Receive]:
    """The whole request body (None when the client went away first), and a `receive` that
    gives the app the same messages again. A body an outer layer read is not read again."""
    if isinstance(receive, _Replay) and receive.whole is not None:
        replay = receive.taken()
        return replay.whole, replay
    return await _buffered(receive, None)


async def _buffered(receive: Receive, limit: int | None) -> tuple[bytes | None, _Replay]:
    """`buffered_body`, raising `_TooLarge` past `limit` bytes."""
    received: list[Message] = []
    body = bytearray()
    complete = False
    while not complete:
        message = await receive()
        received.append(message)
        if message["type"] != "http.request":
            break  # the client went away: let the app see that
        body += message.get("body", b"")
        if limit is not None and len(body) > limit:
            raise _TooLarge(bytes(body[:HEAD_BYTES]))
        complete = not message.get("more_body", False)
    whole = bytes(body) if complete else None
    return whole, _Replay(received, receive, whole)


class _Replay:
    """A `receive` giving the messages a layer read, then the client's own until `release`.

    An HTTP session keeps its last request, and this with it, until the next one (mcp 2.3.0's
    dispatcher holds the last message it read, whose metadata is the request); released, it
    keeps nothing of the connection (uvicorn's request cycle, its transport and socket: ~4 kB
    per idle session).
    """

    __slots__ = ("_read", "_receive", "whole")

    def __init__(self, read: list[Message], receive: Receive, whole: bytes | None) -> None:
        self._read = read
        self._receive = receive
        self.whole = whole
        """The whole body, while none of it was given out (`buffered_body`)."""

    async def __call__(self) -> Message:
        self.whole = None
        if self._read:
            return self._read.pop(0)
        return await self._receive()

    def taken(self) -> _Replay:
        """A replay of the messages this one holds, which this one gives out no more: from now
        on it goes on after them, as if they had been read from it."""
        read, self._read = self._read, []
        whole, self.whole = self.whole, None
        return _Replay(read, self, whole)

    def release(self) -> None:
        """The request is answered: from now on it is over (`http.disconnect`)."""
        self._read.clear()
        self._receive = _disconnected
        self.whole = None


async def _disconnected() -> Message:
    return {"type": "http.disconnect"}


async def refuse(send: Send, refusal: Refusal) -> None:
    """Answer a request with `refusal` (HTTP 400)."""
    await _answer(send, refusal)


async def _answer(send: Send, refusal: Refusal, status: int = 400) -> None:
    body = refusal.body()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


_POSTED = "agent_gateway.posted_object"


def is_modern_post(scope: Scope) -> bool:
    """Whether this is an HTTP POST of the 2026-07-28 era (by its protocol version header)."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return False
    value = first(scope, b"mcp-protocol-version")
    return value is not None and value.decode("latin-1") in MODERN_PROTOCOL_VERSIONS


def posted_request_id(scope: Scope) -> types.RequestId | None:
    """The id of the JSON-RPC request this POST carries (checked by `EnvelopeCheck`); None
    for anything but a request."""
    kept: tuple[bytes, Any] | None = scope.get(_POSTED)
    if kept is None or not isinstance(kept[1], dict):
        return None
    message = cast(dict[str, Any], kept[1])
    request_id = message.get("id")
    return cast(types.RequestId, request_id) if "method" in message and _is_id(request_id) else None


def posted_cancelled(scope: Scope) -> types.RequestId | None:
    """The request id a `notifications/cancelled` this POST carries names (checked by
    `EnvelopeCheck`); None for anything else."""
    kept: tuple[bytes, Any] | None = scope.get(_POSTED)
    if kept is None or not isinstance(kept[1], dict):
        return None
    message = cast(dict[str, Any], kept[1])
    params = message.get("params")
    if message.get("method") != "notifications/cancelled" or not isinstance(params, dict):
        return None
    request_id = cast(dict[str, Any], params).get("requestId")
    return cast(types.RequestId, request_id) if _is_id(request_id) else None


def posted_method(scope: Scope) -> str | None:
    """The method of the JSON-RPC request or notification this POST carries (checked by
    `EnvelopeCheck`); None for anything else."""
    kept: tuple[bytes, Any] | None = scope.get(_POSTED)
    if kept is None or not isinstance(kept[1], dict):
        return None
    method = cast(dict[str, Any], kept[1]).get("method")
    return method if isinstance(method, str) else None


def posted_object(scope: Scope, body: bytes) -> dict[str, Any] | None:
    """The request body as a JSON object (None if it is not one), decoded once per request
    however many layers ask."""
    kept: tuple[bytes, dict[str, Any] | None] | None = scope.get(_POSTED)
    if kept is not None and kept[0] == body:
        return kept[1]
    try:
        decoded: Any = read_json(body)
    except ValueError:
        decoded = None
    found = cast(dict[str, Any], decoded) if isinstance(decoded, dict) else None
    scope[_POSTED] = (body, found)
    return found
