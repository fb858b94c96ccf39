"""Proxied calls of a 2025-era stdio client, passed straight through, answer as the SDK's
session path does.

The downstream server of `test_pass_through` over HTTP on 127.0.0.1, and two gateways in front
of it served as over stdio (`serve_pipes` on a socket pair), one with the pass-through and one
without. Clients of the handshake era: the SDK's `Client` in legacy mode, and raw JSON-RPC lines
for what only the wire shows. Every call is answered alike by both gateways, and the first
passed it through.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from tests.servers.asgi import serve_on_loopback
from toolkits.mcp import McpServerConfig
from toolkits.mcp.config import ProtocolMode

from .proxying import answers_by_name
from .stdio_fronts import StdioFront, stdio_front
from .test_pass_through import NODE_PROTOCOLS, Downstream, Heard
from .test_pass_through_sessions import SMALL

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]


@asynccontextmanager
async def both_fronts(
    protocol: ProtocolMode = "auto",
) -> AsyncGenerator[tuple[Downstream, StdioFront, StdioFront]]:
    """The downstream, a gateway passing calls through and one that does not, both as over
    stdio; their node speaks `protocol` to the downstream."""
    down = Downstream()
    async with serve_on_loopback(down.app()) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=protocol)
        async with (
            stdio_front(config, pass_through=True) as fast,
            stdio_front(config, pass_through=False) as usual,
        ):
            assert fast.shortcut is not None
            assert usual.shortcut is None
            yield down, fast, usual


async def _sdk_answers(front: StdioFront, log_level: types.LoggingLevel | None) -> tuple[Any, ...]:
    answers: list[tuple[Any, ...]] = []
    logs = Heard()
    async with Client(
        front.client(), mode="legacy", logging_callback=logs.on_log, log_level=log_level
    ) as client:
        await client.list_tools()  # as clients do; a call before any listing takes the usual path
        for name, arguments in SMALL:
            heard = Heard()
            result = await client.call_tool(name, arguments, progress_callback=heard.on_progress)
            answers.append(
                (name, result.model_dump(by_alias=True, exclude_none=True), heard.progress)
            )
    return answers, logs.logs


@NODE_PROTOCOLS
async def test_calls_of_a_stdio_client_pass_through_and_answer_as_the_session_path_does(
    protocol: ProtocolMode,
) -> None:
    with anyio.fail_after(60):
        async with both_fronts(protocol) as (_, fast, usual):
            passed = await _sdk_answers(fast, "info")
            assert fast.forwarded == len(SMALL)
            assert passed == await _sdk_answers(usual, "info")
    answers, logs = passed
    by_name = answers_by_name(answers, logs, protocol=protocol)
    assert "_meta" not in by_name["d__echo"][0]  # handshake-era results carry no serverInfo
