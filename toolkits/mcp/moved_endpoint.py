"""A streamable HTTP endpoint that answers its connection's first POST with a 301 or 302 to
another path of its own origin (or a chain of them): the request sent there, and the
connection's requests after it.

The SDK follows a redirect of a POST only when it keeps the method (307, 308). But Django's
`APPEND_SLASH` and nginx's `permanent` rewrites answer `/mcp` with a 301 to `/mcp/`, and a
browser would re-send such a POST as a GET: the SDK leaves it, and the connection fails. At the
connection's start nothing has happened yet (a redirect is no answer: the server ran nothing),
so `MovedEndpoint` sends that same POST to the new URL, and every request of the connection to
the configured URL (the GET of its event stream, the DELETE that ends it) goes there too, the
way a session's requests all go to one endpoint. Two proxies' rules make a chain (`/mcp` ->
`/mcp/` -> `/v2/mcp/`): up to `_MAX_HOPS` are followed, the whole chain said in one line (at
INFO: configuring the last URL saves the round trips) and the last URL told to `on_moved`; a
loop, or a longer chain, fails the request at once naming the chain (`MovedTooOften`): it is a
config mistake, not a way to the server. A redirect later in the connection, or elsewhere
(another host, port or scheme: at any hop), is the SDK's to refuse; the SDK's log line saying
so is left out, as the refusal is reported where it is handled (the node's connection, the
call's result), once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import httpx2

__all__ = ["MovedEndpoint", "MovedTooOften"]

_log = logging.getLogger(__name__)

_MOVED = (301, 302)
_MAX_HOPS = 5
"""The most 301/302s followed in a row (browsers follow 20, but each of ours is a config
mistake to fix: two proxies make two)."""


class MovedTooOften(httpx2.TooManyRedirects):
    """The first POST's 301/302s went round in a loop, or on past `_MAX_HOPS`; the message
    names the chain. An httpx2 error, as the transport it is raised in speaks: the connection
    fails with it as with any other request error."""


class _ReportedWhereHandled(logging.Filter):
    """The SDK logs a redirect of a request it does not follow, then fails the request with
    the same words (`_unfollowed_redirect`): at connect it was said three times before the
    node said it."""

    def filter(self, record: logging.LogRecord) -> bool:
        said = record.getMessage()
        return not (said.startswith("Redirect to ") and " not followed" in said)


logging.getLogger("mcp.client.streamable_http").addFilter(_ReportedWhereHandled())


class MovedEndpoint(httpx2.AsyncBaseTransport):
    """Requests to `url` on `inner`, to where it moved once its first POST was redirected
    within its origin (see the module); `on_moved` is told the new URL."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        url: str,
        *,
        node: str,
        on_moved: Callable[[str], None],
    ) -> None:
        self._inner = inner
        self._url = httpx2.URL(url)
        self._node = node
        self._on_moved = on_moved
        self._moved: httpx2.URL | None = None
        self._started = False
        """A POST was answered: a redirect from now on is no move."""

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._moved is not None and request.url == self._url:
            request = _readdressed(request, self._moved)
        response = await self._inner.handle_async_request(request)
        if request.method != "POST" or self._started:
            return response
        self._started = True
        hops: list[tuple[httpx2.URL, int]] = []  # each URL that moved, and its status
        while (target := _moved_within_origin(request, response)) is not None:
            hops.append((request.url, response.status_code))
            await response.aclose()
            if target in [url for url, _ in hops] or len(hops) > _MAX_HOPS:
                raise MovedTooOften(_too_often(hops, target), request=request)
            request = _readdressed(request, target)
            response = await self._inner.handle_async_request(request)
        if hops:
            self._moved = request.url
            _log.info(
                "MCP server %r: %s: this connection uses %s (configure it as the url to save "
                "the round trip%s)",
                self._node,
                _chain(hops, request.url),
                request.url,
                "s" if len(hops) > 1 else "",
            )
            self._on_moved(str(request.url))
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _moved_within_origin(request: httpx2.Request, response: httpx2.Response) -> httpx2.URL | None:
    """Where a 301 or 302 `response` to the POST `request` sends it, when that is on the same
    origin (the same URL too: a loop) and the request's body is at hand to send again; else
    None."""
    location = response.headers.get("location")
    if response.status_code not in _MOVED or not location:
        return None
    if not isinstance(request.stream, httpx2.ByteStream):
        return None  # a streamed body is gone: nothing to send again
    try:
        target = request.url.join(location)
    except httpx2.InvalidURL:
        return None
    origin = (request.url.scheme, request.url.host, request.url.port)
    if (target.scheme, target.host, target.port) != origin:
        return None
    return target  # the same URL again too: a loop, said so


def _chain(hops: list[tuple[httpx2.URL, int]], last: httpx2.URL) -> str:
    """`URL answered HTTP 301, moved to URL2, which answered HTTP 302, moved to LAST`."""
    (first, status), *more = hops
    said = f"{first} answered HTTP {status}"
    for url, status in more:
        said += f", moved to {url}, which answered HTTP {status}"
    return f"{said}, moved to {last}"


def _too_often(hops: list[tuple[httpx2.URL, int]], target: httpx2.URL) -> str:
    looped = target in [url for url, _ in hops]
    why = "a redirect loop" if looped else f"more than {_MAX_HOPS} redirects"
    return f"{_chain(hops, target)}: {why}, not followed; set url to where the server is"


def _readdressed(request: httpx2.Request, url: httpx2.URL) -> httpx2.Request:
    return httpx2.Request(
        request.method,
        url,
        headers=request.headers,
        stream=request.stream,
        extensions=request.extensions,
    )
