"""A downstream's `roots/list` with no known origin (on its session's own stream, not the
call's) is answered by the client whose call is in flight, with that client's roots: never
another client's, and refused for a client that declared no roots. Passed through or not, in
both client eras.

What a server caches per session is another matter: the gateway's clients share one session
to each server (README, proxy mode)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext
from pydantic import FileUrl

from toolkits import result_text
from toolkits.mcp import McpServerConfig

from ..servers.asgi import serve_on_loopback
from .proxying import gateway_front
from .support import ERAS
from .test_pass_through import Downstream

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def roots_of(who: str) -> Callable[[ClientRequestContext], Awaitable[types.ListRootsResult]]:
    async def roots(_ctx: ClientRequestContext) -> types.ListRootsResult:
        root = types.Root(uri=FileUrl(f"file:///home/{who}"), name=who)
        return types.ListRootsResult(roots=[root])

    return roots


@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
@pytest.mark.parametrize("era", ERAS)
async def test_each_client_is_asked_its_own_roots(era: str, pass_through: bool) -> None:
    down = Downstream()
    said: dict[str, str] = {}
    with anyio.fail_after(60):
        async with (
            serve_on_loopback(down.app()) as base,
            gateway_front(McpServerConfig(url=f"{base}/mcp"), pass_through=pass_through) as (
                url,
                _,
                _,
            ),
        ):
            for who in ("ann", "bob", "nobody"):
                keys: dict[str, Any] = {}
                if who != "nobody":
                    keys["list_roots_callback"] = roots_of(who)
                async with Client(url, mode=era, **keys) as client:
                    await client.list_tools()
                    said[who] = result_text(await client.call_tool("d__roots", {}))
    assert said["ann"] == "ann file:///home/ann"
    assert said["bob"] == "bob file:///home/bob"
    assert said["nobody"].startswith("could not ask: roots/list refused"), said["nobody"]
