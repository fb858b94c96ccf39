"""The SDK's own POSTs on the lean HTTP client: httpx2 above, `lean_http` below.

A node's calls that are not passed through (an agent's tool calls, listings, the handshake) go
through the SDK's streamable HTTP transport, which wants an httpx2 client. Below httpx2's
client, httpcore2 and h11 were ~17 % of the gateway's samples in a served agent loop (py-spy,
bench/RESULTS.md item 40): more than the lean client spends on a whole call passed through.
`LeanPosts` is that client's transport: a POST to the node's URL with a body in memory goes out
on `LeanHttp`; everything else (the GET of a listening stream, the DELETE that ends a session,
a redirect elsewhere, a streamed body) on the inner transport. Auth flows, cookies, redirects
and the request's headers stay httpx2's: they happen above a transport.

An answer saying the server no longer knows the session (`http_refusal.FORGOTTEN`, to a
request carrying its id) is told to the node: the SDK (mcp 2.3) relays it as the request's
error (`Session not found`) and goes on with the session, so every request after it got the
same. To a POST it means the session is gone (`on_forgotten(status)`); to the GET of the
server's event stream only maybe (`on_doubt()`: the node asks something on the session, whose
answer settles it), for a server with no GET route may answer 404 to that on a live session.

httpx2's read timeout holds as it did: for the head, and for each wait for more of the body.
A body left unread when the response is closed is drained by the connection (a stream's last
chunk comes just after the message the SDK waited for) unless the closing task is cancelled:
a cancelled request's connection is closed, so that the server sees its stream end.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, cast

import anyio
import anyio.lowlevel
import httpx2

from ..json_bytes import json_bytes, read_json
from .http_refusal import ANSWERS, FORGOTTEN, is_refusal, refusal_answer
from .lean_http import LeanHttp, LeanResponse
from .sent_credentials import SentCredentials

__all__ = ["LeanPosts"]

_LEFT_OUT = frozenset({"host", "content-length", "connection", "accept-encoding", "user-agent"})
"""Request headers the lean client writes itself, or (`connection`) does without."""


class LeanPosts(httpx2.AsyncBaseTransport):
    """POSTs to `url` on `lean` (when given), all else on `inner`; `observe` sees every POST.
    An answer to a request that is no answer (`http_refusal`: an error status, an HTML page)
    reaches the SDK as the JSON-RPC error it means, naming `node`, without the credentials
    `sent` (nor the Authorization the request went with). A session the server no longer knows
    is told to `on_forgotten` or `on_doubt` (see the module)."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        lean: LeanHttp | None,
        url: str,
        observe: Callable[[httpx2.Request], None],
        *,
        node: str,
        sent: SentCredentials,
        on_forgotten: Callable[[int], None] | None = None,
        on_doubt: Callable[[], None] | None = None,
    ) -> None:
        self._inner = inner
        self._lean = lean
        self._url = httpx2.URL(url)
        self._observe = observe
        self._node = node
        self._sent = sent
        self._on_forgotten = on_forgotten
        self._on_doubt = on_doubt

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST":
            response = await self._inner.handle_async_request(request)
            doubt = self._on_doubt
            if doubt and request.method == "GET" and _forgotten(request, response.status_code):
                doubt()
            return response
        self._observe(request)
        lean = self._lean
        if (
            lean is None
            or request.url != self._url
            or not isinstance(request.stream, httpx2.ByteStream)
        ):
            response = await self._inner.handle_async_request(request)
            if response.status_code != 200 or not _answer(response.headers.get("content-type")):
                return await self._read(request, response)
            return response
        headers = {
            name: value for name, value in request.headers.multi_items() if name not in _LEFT_OUT
        }
        timeouts: dict[str, Any] = request.extensions.get("timeout", {})
        timeout: float | None = timeouts.get("read")
        posting = lean.post(request.content, headers)
        try:
            with anyio.fail_after(timeout):
                response = await posting.__aenter__()
        except TimeoutError as exc:
            raise httpx2.ReadTimeout("no answer in time", request=request) from exc
        answer = httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_Body(response, posting, timeout),
            request=request,
            extensions={"http_version": b"HTTP/1.1"},
        )
        if response.status_code != 200 or not _answer(response.headers.get("content-type")):
            return await self._read(request, answer)
        return answer

    async def _read(self, request: httpx2.Request, response: httpx2.Response) -> httpx2.Response:
        """`response`, or the JSON-RPC error it means if it refused a request."""
        status, content_type = response.status_code, response.headers.get("content-type", "")
        if self._on_forgotten is not None and _forgotten(request, status):
            self._on_forgotten(status)
        if not is_refusal(status, content_type):
            return response
        if status == 404 and "mcp-session-id" in request.headers:
            return response  # the SDK's: the session is gone
        try:
            message = read_json(await request.aread())  # a redirected request's is not read
        except (ValueError, httpx2.StreamError):
            return response
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            return response  # a notification, an answer: the SDK reads nothing of it
        request_id = cast(dict[str, Any], message)["id"]
        sent = self._sent.with_authorization(request.headers.get("authorization"))
        try:
            said = await refusal_answer(
                self._node, request_id, status, content_type, response.aiter_bytes(), sent
            )
        finally:
            await response.aclose()
        return httpx2.Response(
            status if status >= 400 else 200,
            headers={"content-type": "application/json"},
            content=json_bytes(said),
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def _forgotten(request: httpx2.Request, status: int) -> bool:
    """Whether `status` answers `request` saying the server no longer knows its session."""
    return status in FORGOTTEN and "mcp-session-id" in request.headers


def _answer(content_type: str | None) -> bool:
    return content_type is not None and content_type.startswith(ANSWERS)


class _Body(httpx2.AsyncByteStream):
    def __init__(
        self,
        response: LeanResponse,
        posting: AbstractAsyncContextManager[LeanResponse],
        timeout: float | None,
    ) -> None:
        self._response = response
        self._posting = posting
        self._timeout = timeout
        self._failed = False
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        response = self._response
        try:
            if "content-length" in response.headers:  # one wake at its end, not one per read
                with anyio.fail_after(self._timeout):
                    whole = await response.aread()
                yield whole
                return
            pieces = response.aiter_bytes()
            while True:
                with anyio.fail_after(self._timeout):
                    piece = await anext(pieces, None)
                if piece is None:
                    return
                yield piece
        except TimeoutError as exc:
            self._failed = True
            raise httpx2.ReadTimeout("the answer stalled") from exc
        except GeneratorExit:  # the reader stopped early: `aclose` decides
            raise
        except BaseException:
            self._failed = True
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        failed = self._failed
        try:
            if not failed and not self._response.done:
                await anyio.lowlevel.checkpoint_if_cancelled()
        except BaseException:
            failed = True  # cancelled: closing the connection ends the request's stream
            raise
        finally:
            await self._posting.__aexit__(BaseException if failed else None, None, None)
