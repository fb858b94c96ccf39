"""Proxy mode over real HTTP: questions and list changes reach the client in both eras.

Over HTTP a 2026-07-28 client's rounds are separate requests, so the parked call must outlive
the request that started it; a 2025-11-25 client hears list changes on its GET stream.
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from toolkits import result_text

from .proxying import ClientAnswers, Heard, listening, mcp_nodes
from .support import ERAS, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("era", ERAS)
async def test_questions_and_changes_cross_http(era: str) -> None:
    asker = CatalogServer("asker")
    answers = ClientAnswers()
    heard = Heard()
    async with mcp_nodes(("asker", asker), protocol="legacy") as nodes:
        app = http_app(serve(Gateway(nodes, []), expose_tools=True), HttpOptions("127.0.0.1", 0))
        with anyio.fail_after(30):
            async with (
                serve_on_loopback(app) as base,
                Client(
                    f"{base}/mcp",
                    mode=era,
                    message_handler=heard.on_message if era == "legacy" else None,
                    **answers.callbacks(),
                ) as client,
                listening(client, heard),
            ):
                sampled = await client.call_tool("asker__sample", {"text": "over http"})
                elicited = await client.call_tool("asker__elicit", {})
                await client.call_tool("asker__change", {"lists": ["tools"]})
                await heard.until(kinds={"tools"})
                tools = {tool.name for tool in (await client.list_tools()).tools}
    assert result_text(sampled) == "sampled '42' from upstream-model"
    assert result_text(elicited) == "elicited accept {'name': 'Ada'}"
    assert "asker__added_4" in tools
