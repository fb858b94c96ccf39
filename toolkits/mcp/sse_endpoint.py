"""A legacy SSE server's event stream until its `endpoint` event: a connect that cannot work
fails at once, saying why.

The SDK's `sse_client` (mcp 2.3) opens the event stream and waits for the event naming where
to POST. An endpoint on another origin it refuses inside its reader task, which logs an ERROR
and a traceback and hands the error to a stream nobody reads yet: the connect hung until its
`connect_timeout` (60 s), then said "TimeoutError". A stream that ended before its endpoint
said "RuntimeError: Child exited without calling task_status.started()", and an error status
httpx's own text (with an MDN link), not the server's body.

`endpoint_guard(inner, node, sent, refused)` wraps the SSE node's transport: its event stream
(the GET) answered with an error status (or a page) raises `EventStreamRefused` naming the
status and quoting the body (`http_refusal`), as a streamable HTTP server's does; the stream is
read as it passes until its `endpoint` event, and one on another origin, or the stream's end
before any, ends it there, the cause put in `refused`: the transport (`transport._sse`) raises
it in place of the SDK's error. After the endpoint, bytes pass unread.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import urljoin, urlsplit

import httpx2

from .http_refusal import is_refusal, refusal_answer
from .sent_credentials import SentCredentials

__all__ = ["EventStreamRefused", "endpoint_guard"]

_LINE_END = re.compile(rb"\r\n|\r|\n")


class EventStreamRefused(ConnectionError):
    """A legacy SSE server's event stream can give no session: said why."""


def endpoint_guard(
    inner: httpx2.AsyncBaseTransport, node: str, sent: SentCredentials, refused: list[str]
) -> httpx2.AsyncBaseTransport:
    """`inner`, whose event streams are refused as this module says; why in `refused`."""
    return _EndpointGuard(inner, node, sent, refused)


class _EndpointGuard(httpx2.AsyncBaseTransport):
    def __init__(
        self, inner: httpx2.AsyncBaseTransport, node: str, sent: SentCredentials, refused: list[str]
    ) -> None:
        self._inner = inner
        self._node = node
        self._sent = sent
        self._refused = refused

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if request.method != "GET":  # a message POSTed, or an authorization flow's request
            return response
        content_type = response.headers.get("content-type", "")
        if is_refusal(response.status_code, content_type):
            try:
                answer = await refusal_answer(
                    self._node,
                    None,
                    response.status_code,
                    content_type,
                    response.aiter_raw(),
                    self._sent,
                )
            finally:
                await response.aclose()
            raise EventStreamRefused(answer["error"]["message"])
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _UntilEndpoint(response.stream, str(request.url), self._refused)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _UntilEndpoint(httpx2.AsyncByteStream):
    """An event stream read as it passes until its `endpoint` event (SSE's lines and fields,
    as the SDK's parser reads them), which must be on the stream's own origin."""

    def __init__(self, inner: httpx2.AsyncByteStream, url: str, refused: list[str]) -> None:
        self._inner = inner
        self._url = url
        self._refused = refused

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = b""
        event, data = "", list[str]()
        endpoint: str | None = None
        async for chunk in self._inner:
            if endpoint is None:
                pending += chunk
                # A "\r" last may be half of a "\r\n": its line ends with the next chunk.
                held = pending.endswith(b"\r")
                *lines, pending = _LINE_END.split(pending[:-1] if held else pending)
                pending += b"\r" if held else b""
                for line in lines:
                    text = line.decode("utf-8", "replace")
                    if text:
                        name, _, value = text.partition(":")
                        value = value.removeprefix(" ")
                        if name == "event":
                            event = value
                        elif name == "data":
                            data.append(value)
                        continue
                    if event == "endpoint" and data:
                        endpoint = urljoin(self._url, "\n".join(data))
                        if not _same_origin(endpoint, self._url):
                            origin = urlsplit(endpoint)
                            self._refused.append(
                                f"gave an endpoint on another origin "
                                f"({origin.scheme}://{origin.netloc}): refused"
                            )
                            return  # the SDK hears no endpoint: it ends as one never sent
                        break
                    event, data = "", []
            yield chunk
        if endpoint is None:
            self._refused.append("closed its event stream before sending its endpoint")

    async def aclose(self) -> None:
        await self._inner.aclose()


def _same_origin(url: str, other: str) -> bool:
    """As the SDK checks an endpoint: the same scheme, host and port."""
    one, two = urlsplit(url), urlsplit(other)
    return (one.scheme, one.netloc) == (two.scheme, two.netloc)
