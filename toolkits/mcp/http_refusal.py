"""An HTTP answer that is no JSON-RPC answer, said plainly, as the answer to its one request.

A server (or a proxy in front of it) may answer one request with an HTTP error status, or with
a page (`text/html`) where JSON or an event stream was due: a deploy's 502, a login page. That
request failed; the session did not. Both ways a node's calls go (`forward_http`, and the SDK
client through `lean_transport.LeanPosts`) turn such an answer into a JSON-RPC error answering
that request (`refusal_answer`), whose text names the status and quotes the start of a text
body. The SDK alone said `Server returned an error response` for every status alike (and logged
an ERROR of its own for an unexpected content type); passed through, the answer was read as an
event stream that ended early, and the node dropped its whole connection.

One refusal is of the session, not the request: a server that restarted, or ended the session,
answers a request carrying the session's id with `FORGOTTEN` (the request was not read). The
node then drops the connection and reconnects (`Connection.forgotten`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import suppress
from http import HTTPStatus
from typing import Any, cast

import mcp_types

from ..json_bytes import json_bytes, read_json
from .sent_credentials import SentCredentials

__all__ = ["ANSWERS", "FORGOTTEN", "is_refusal", "refusal_answer"]

ANSWERS = ("application/json", "text/event-stream")
"""The content types of an answer to a request."""
FORGOTTEN = frozenset({400, 404})
"""The statuses that answer a request carrying a session id the server no longer knows: 404
as the spec says; 400 from servers built on the TypeScript SDK's examples (server-everything,
e.g. after a restart)."""
_READ = 4096
"""Bytes of a text body read for its excerpt."""
_READ_JSON = 1 << 20
"""Bytes of a JSON body read for the JSON-RPC error it may hold."""
_EXCERPT = 200
"""Characters of a body quoted."""
_TAG = re.compile(r"<(script|style)\b.*?</\1\s*>|<[^>]*>", re.IGNORECASE | re.DOTALL)
_SPACE = re.compile(r"\s+")
JsonObject = dict[str, Any]


def is_refusal(status: int, content_type: str) -> bool:
    """Whether the answer to a request is no answer: neither a success in JSON or an event
    stream, nor a redirect (followed where it may be), nor a refusal for want of authorization
    (401, 403: the authorization flow answers those)."""
    if status in (401, 403) or 300 <= status < 400:
        return False
    ok = 200 <= status < 300 and status not in (202, 204)
    return not (ok and content_type.lower().startswith(ANSWERS))


async def refusal_answer(
    node: str,
    request_id: Any,
    status: int,
    content_type: str,
    body: AsyncIterator[bytes],
    sent: SentCredentials,
) -> JsonObject:
    """The JSON-RPC error answering request `request_id` for a refusal (`is_refusal`): the one
    an error status's JSON body holds, else ours, `MCP server 'x' answered HTTP 502 (Bad
    Gateway): <the start of its text>`; either way with the credentials `sent` masked (a page
    may repeat the request's headers). Reads a bounded start of `body`."""
    kind = content_type.split(";")[0].strip().lower()
    json = kind == "application/json"
    texts = json or kind.startswith("text/") or kind.endswith(("+json", "/xml", "+xml"))
    read = await _start(body, _READ_JSON if json else _READ) if texts else b""
    if json and status >= 400:
        error = _error_in(read)
        if error is not None:
            return {"jsonrpc": "2.0", "id": request_id, "error": _masked(error, sent)}
    text = f"MCP server {node!r} answered HTTP {status}"
    if status < 400:
        text += f" with {kind or 'no body'}, not JSON or an event stream"
    else:
        with suppress(ValueError):  # a status of no known name
            text += f" ({HTTPStatus(status).phrase})"
    if excerpt := _excerpt(read[:_READ], sent, markup="html" in kind or "xml" in kind):
        text += f": {excerpt}"
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": mcp_types.INTERNAL_ERROR, "message": text},
    }


async def _start(body: AsyncIterator[bytes], limit: int) -> bytes:
    read = bytearray()
    async for piece in body:
        read += piece
        if len(read) >= limit:
            break
    return bytes(read)


def _error_in(body: bytes) -> JsonObject | None:
    """The JSON-RPC error `body` holds, if it is one (as the SDK reads an error status's)."""
    try:
        message = read_json(body)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    error = cast(JsonObject, message).get("error")
    if not isinstance(error, dict):
        return None
    fields = cast(JsonObject, error)
    if not isinstance(fields.get("code"), int) or not isinstance(fields.get("message"), str):
        return None
    return fields


def _masked(error: JsonObject, sent: SentCredentials) -> JsonObject:
    """A server's `error` with the credentials `sent` masked in its message and its data (left
    out where masking its JSON text leaves no JSON)."""
    masked = {**error, "message": sent.mask(error["message"])}
    if "data" in error:
        said = json_bytes(error["data"]).decode()
        if (hidden := sent.mask(said)) != said:
            try:
                masked["data"] = read_json(hidden.encode())
            except ValueError:
                del masked["data"]
    return masked


def _excerpt(body: bytes, sent: SentCredentials, *, markup: bool) -> str:
    """The start of a text body, masked before it is cut (a credential cut short is not found)."""
    text = body.decode("utf-8", "replace")
    if markup:
        text = _TAG.sub(" ", text)
    text = sent.mask(_SPACE.sub(" ", text).strip())
    return text[:_EXCERPT].rstrip() + "…" if len(text) > _EXCERPT else text
