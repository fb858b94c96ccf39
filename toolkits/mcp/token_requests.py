"""Requests to an authorization server's token endpoint: bounded on their own, and named when
one does not answer.

The OAuth flow's requests go on the node's HTTP client, whose read timeout is the MCP
requests' (300 s: a tool may take that long). A token endpoint that hangs would hold an
`auth login` that long, and then say nothing of where it hung. So each token request gets
`seconds`, and the one not yet answered is remembered: a flow cut off then says which
endpoint (its URL without query or user info) did not answer within how long.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp.client.auth import OAuthFlowError

from ..errors import find_error

__all__ = ["TOKEN_SECONDS", "TokenRequests", "oauth_error"]

TOKEN_SECONDS = 30.0


@dataclass
class TokenRequests:
    """The token requests of one provider's flow."""

    seconds: float = TOKEN_SECONDS
    unanswered: str | None = None
    """The token endpoint (no query, no user info) of the request sent and not yet answered."""

    def bound(self, request: httpx2.Request, token_endpoint: str) -> httpx2.Request:
        """`request`, given `seconds` if it goes to `token_endpoint`; remembered until
        `answered`."""
        if request.method != "POST" or str(request.url) != token_endpoint:
            return request
        request.extensions = {
            **request.extensions,
            "timeout": httpx2.Timeout(self.seconds).as_dict(),
        }
        parts = urlsplit(token_endpoint)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        self.unanswered = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        return request

    def answered(self) -> None:
        self.unanswered = None

    def silence(self, exc: BaseException) -> OAuthFlowError | None:
        """What an `auth login` says for `exc` when it ended the wait for a token request's
        answer (that request's timeout, or the login's own), else None."""
        if self.unanswered is None:
            return None
        if not find_error(exc, httpx2.TimeoutException) and not find_error(exc, TimeoutError):
            return None
        return OAuthFlowError(
            f"the token endpoint {self.unanswered} did not answer within {self.seconds:g} s; "
            "nothing was changed: the stored authorization (if any) is as it was"
        )


async def oauth_error(response: httpx2.Response) -> str | None:
    """The `error` of an OAuth error answer (RFC 6749 §5.2), if it names one."""
    try:
        body: object = json.loads(await response.aread())
    except ValueError:
        return None
    error = cast(dict[str, object], body).get("error") if isinstance(body, dict) else None
    return error if isinstance(error, str) else None
