"""The authorization page, before a person (or our fetch) is sent to it.

RFC 6749 §4.1.2.1: when the client ID or the redirect URI of an authorization request is
unknown or wrong, the authorization server must not redirect; it answers the request itself,
with an error page. A browser then shows that page and never comes back to our callback, so
`auth login` would wait for nothing. `probe_authorization_page` asks once, without following
the redirect, and raises `AuthorizationPageRefused` (with the server's own words) for such an
answer; `fetch_authorization` (no person: tests and CI) follows the redirects itself.

The URLs of these requests carry the flow's `state` and code: `log_secrets` keeps them out of
httpx2's request lines.
"""

from __future__ import annotations

import re
from typing import Any, cast
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError

from .oauth_callback import CALLBACK_PATH

__all__ = ["AuthorizationPageRefused", "fetch_authorization", "probe_authorization_page"]

_PROBE_TIMEOUT = 10.0
_FETCH_TIMEOUT = 30.0
_FETCH_REDIRECTS = 10
_MAX_DETAIL = 300


class AuthorizationPageRefused(OAuthFlowError):
    """The authorization server answered the authorization request with an error of its own,
    not a redirect: it does not know the client ID (or its redirect URI)."""

    def __init__(self, status: int, detail: str, *, why: str = "") -> None:
        self.status = status
        self.detail = detail
        said = f", {detail}" if detail else ""
        super().__init__(
            f"the authorization server refused the authorization request (HTTP {status}{said})"
            + (f": {why}" if why else "")
        )


async def probe_authorization_page(url: str) -> None:
    """GET the authorization URL once, not following its redirect. Raises
    `AuthorizationPageRefused` for a 4xx answer; anything else (a login page, a redirect, a
    server out of reach) is for the browser to show."""
    try:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=_PROBE_TIMEOUT) as http:
            response = await http.get(url)
    except httpx2.HTTPError:
        return
    if 400 <= response.status_code < 500:
        raise AuthorizationPageRefused(response.status_code, _page_text(response))


async def fetch_authorization(url: str) -> None:
    """GET the authorization URL and follow its redirects: the last lands on our callback."""
    async with httpx2.AsyncClient(
        follow_redirects=True, max_redirects=_FETCH_REDIRECTS, timeout=_FETCH_TIMEOUT
    ) as http:
        response = await http.get(url)
    status = response.status_code
    if urlsplit(str(response.url)).path == CALLBACK_PATH and status == 200:
        return
    if not response.history and 400 <= status < 500:
        raise AuthorizationPageRefused(status, _page_text(response))
    detail = _page_text(response)
    raise OAuthFlowError(
        f"fetching the authorization page ended at HTTP {status} without reaching the "
        "callback (does the server need a person to approve?)" + (f": {detail}" if detail else "")
    )


def _page_text(response: httpx2.Response) -> str:
    """What the server said: an OAuth error (`error: error_description`), or its page's text."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        fields = cast(dict[str, Any], body)
        error, description = fields.get("error"), fields.get("error_description")
        said = ": ".join(str(part) for part in (error, description) if part)
        if said:
            return _short(said)
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", response.text, flags=re.I | re.S)
    return _short(re.sub(r"<[^>]*>", " ", text))


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_DETAIL else text[: _MAX_DETAIL - 1] + "…"
