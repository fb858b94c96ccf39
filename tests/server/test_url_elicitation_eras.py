"""A server's URL-mode elicitation during a proxied call reaches the client in the shape of
the client's era, on either path.

2025-11-25 requires a URL elicitation's `elicitationId`; 2026-07-28 removed it. A 2026-07-28
server's elicitation has none, so a handshake-era client gets one of the gateway's (fresh for
every question), where its SDK rejected the request as invalid; a handshake-era server's own
id reaches such a client as it is. A 2026-07-28 client gets none, as from the server directly.

A handshake-era server's word that the elicitation is complete (`notifications/elicitation/
complete`) reaches the client that was asked it, during its call; one naming an elicitation
nobody was asked through the call, or one after the call, reaches nobody.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext, IncomingMessage

from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import ELICITATION_ID, CatalogServer
from toolkits import result_text
from toolkits.mcp import McpServerConfig, ProtocolMode

from .proxying import gateway_front
from .support import ERAS

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


class Opens:
    """The client's side: opens every page it is shown, and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: list[types.ElicitRequestParams] = []

    async def __call__(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        self.asked.append(params)
        return types.ElicitResult(action="accept")


class Hears:
    """The ids of the elicitations a client is told are complete."""

    def __init__(self) -> None:
        self.completed: list[str] = []

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ElicitCompleteNotification):
            self.completed.append(message.params.elicitation_id)


@pytest.mark.parametrize("pass_through", [True, False], ids=["pass-through", "sdk"])
@pytest.mark.parametrize("down", ["legacy", "modern"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_url_elicitation_reaches_the_client_as_its_era_has_it(
    era: str, down: ProtocolMode, pass_through: bool
) -> None:
    asker = CatalogServer("asker")
    asker.asks_by_url()
    opens, hears, other = Opens(), Hears(), Hears()
    answers: list[types.CallToolResult] = []
    with anyio.fail_after(30):
        async with serve_on_loopback(asker.server.streamable_http_app(host="127.0.0.1")) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol=down)
            async with (
                gateway_front(config, pass_through=pass_through) as (url, layer, _),
                Client(url, mode=era, elicitation_callback=opens, message_handler=hears) as client,
                # Another client of the gateway, connected meanwhile: told nothing.
                Client(url, mode=era, message_handler=other) as bystander,
            ):
                await bystander.list_tools()
                await client.list_tools()  # the gateway has learnt its tools' names
                for _ in range(2):
                    answers.append(await client.call_tool("d__elicit_url", {}))
                handshake = client.protocol_version == "2025-11-25"
            if layer is not None:
                assert layer.forwarded == 2
    assert [result_text(answer) for answer in answers] == ["elicited accept None"] * 2
    asked: list[Any] = opens.asked
    assert all(isinstance(params, types.ElicitRequestURLParams) for params in asked)
    assert [params.url for params in asked] == ["https://example.com/sign-in"] * 2
    ids = [params.elicitation_id for params in asked]
    assert other.completed == []
    if not handshake:
        assert ids == [None, None]
        assert hears.completed == []  # its era has no such notification
    elif down == "legacy":
        assert ids == [ELICITATION_ID, ELICITATION_ID]  # the server's own
        # Each call's own elicitation, never the one it was not asked.
        assert hears.completed == [ELICITATION_ID, ELICITATION_ID]
    else:
        assert all(ids)  # ours, one for each question
        assert ids[0] != ids[1]
