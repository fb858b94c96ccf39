"""An auth for HTTP nodes that costs nothing until the server asks for authorization."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING

import anyio
import httpx2
from mcp.client.auth.utils import extract_field_from_www_auth

if TYPE_CHECKING:
    from .oauth import McpOAuth

__all__ = ["LazyOAuth", "is_step_up"]


class LazyOAuth(httpx2.Auth):
    """Sends requests as they are until the server asks for authorization (401, or 403
    `insufficient_scope`); then makes the real provider (`make()`) and lets it answer.

    A server that never asks costs nothing: no token store is read, no port is chosen. One
    that does costs one refused request per connection (stored tokens are used from then on).
    """

    requires_response_body = True

    def __init__(self, make: Callable[[], Awaitable[McpOAuth]]) -> None:
        self._make = make
        self._real: McpOAuth | None = None
        self._lock = anyio.Lock()

    @property
    def engaged(self) -> bool:
        """Whether the server asked for authorization: from then on requests carry tokens."""
        return self._real is not None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if self._real is None:
            response = yield request
            if response.status_code != 401 and not is_step_up(response):
                return
            async with self._lock:
                if self._real is None:
                    self._real = await self._make()
        flow = self._real.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()


def is_step_up(response: httpx2.Response) -> bool:
    return (
        response.status_code == 403
        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
    )
