"""A proxied call to a server that uses SSE polling (it closes the call's event stream and
answers on the stream the client resumes with `Last-Event-ID`) gets its answer, passed through
or not, for clients of both eras over HTTP."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.servers.asgi import serve_on_loopback
from tests.servers.polling_http import polling_server
from toolkits import result_text
from toolkits.mcp import McpServerConfig

from .proxying import gateway_front

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("era", ["legacy", "auto"])
@pytest.mark.parametrize("pass_through", [True, False], ids=["passed", "usual"])
async def test_a_polled_call_is_answered_through_the_gateway(era: str, pass_through: bool) -> None:
    front = polling_server(retry_interval=1)
    with anyio.fail_after(60):
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol="legacy", timeout=10)
            async with (
                gateway_front(config, pass_through=pass_through) as (url, layer, _),
                Client(url, mode=era) as client,
            ):
                await client.list_tools()  # as clients do: a tool not yet listed goes the usual way
                polled = await client.call_tool("d__polled", {"text": "hi"})
                quick = await client.call_tool("d__quick", {"text": "after"})
                assert (layer.forwarded if layer is not None else 0) == (2 if pass_through else 0)
    assert (polled.is_error, result_text(polled)) == (False, "polled hi")
    assert result_text(quick) == "quick after"
    assert len(front.resumed_after) == 1
