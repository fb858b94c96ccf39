"""A proxy relays results real servers send that SDK servers would not, as the wire shows.

A real subprocess server (`tests/servers/odd_stdio.py`) behind a gateway over HTTP, with the
pass-through and without; a raw 2025-era JSON-RPC session in front, to see what the proxy
sends on the wire (an SDK client would check it first); and the SDK's clients of both eras,
over HTTP and over stdio.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest
from mcp import Client

from toolkits.mcp import McpServerConfig

from .proxying import gateway_front
from .stdio_fronts import stdio_front
from .test_pass_through_sessions import RawSession

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ODD = Path(__file__).parents[1] / "servers" / "odd_stdio.py"
BOTH_PATHS = pytest.mark.parametrize("pass_through", [True, False], ids=["passed", "usual"])
JsonObject = dict[str, Any]


@asynccontextmanager
async def raw_session(*, pass_through: bool) -> AsyncGenerator[tuple[RawSession, Any]]:
    """A raw session on a gateway in front of the odd server (node `d`); the pass-through."""
    config = McpServerConfig(command=sys.executable, args=[str(ODD)])
    async with (
        gateway_front(config, pass_through=pass_through) as (url, layer, _),
        httpx2.AsyncClient() as http,
    ):
        session = RawSession(http, url, "2025-11-25")
        await session.open()
        # Listed first, as clients do: a tool not yet listed takes the usual path.
        await session.post({"jsonrpc": "2.0", "id": "list", "method": "tools/list"})
        yield session, layer


async def _result(session: RawSession, name: str) -> JsonObject:
    [answer] = await session.post(session.call(name, {}))
    return answer["result"]


@BOTH_PATHS
async def test_a_result_that_breaks_its_output_schema_is_relayed_as_sent(
    pass_through: bool,
) -> None:
    with anyio.fail_after(60):
        async with raw_session(pass_through=pass_through) as (session, layer):
            missing = await _result(session, "d__weather")
            bad = await _result(session, "d__weather_bad")
            if pass_through:
                assert layer.forwarded == 2
    # Not an error of the gateway's naming the server's own name for the tool.
    assert missing["content"] == [{"type": "text", "text": "21.5 degrees"}]
    assert not missing.get("isError")
    assert "structuredContent" not in missing
    assert bad["structuredContent"] == {"temp": "warm"}
    assert not bad.get("isError")


async def test_a_lone_surrogate_passed_through_is_relayed_as_it_came() -> None:
    with anyio.fail_after(60):
        async with raw_session(pass_through=True) as (session, layer):
            response = await session.http.post(
                session.url, json=session.call("d__cut", {}), headers=session.headers()
            )
            assert layer.forwarded == 1
    assert response.status_code == 200
    # The escape the server wrote, not U+FFFD, and no 500 for bytes UTF-8 has none of.
    assert b'"text":"bad\\ud800x"' in response.content


async def test_a_lone_surrogate_on_the_usual_path_is_u_fffd() -> None:
    with anyio.fail_after(60):
        async with raw_session(pass_through=False) as (session, _):
            cut = await _result(session, "d__cut")
    assert cut["content"] == [{"type": "text", "text": "bad\ufffdx"}]
    assert not cut.get("isError")


def too_deep(depth: int) -> list[JsonObject]:
    said = f"MCP server 'd' sent a result nested too deeply ({depth} levels; at most 100)"
    return [{"type": "text", "text": said}]


@BOTH_PATHS
async def test_a_result_nested_too_deeply_is_that_calls_error_result(
    pass_through: bool, caplog: pytest.LogCaptureFixture
) -> None:
    calls = [({"depth": 150}, 150), ({"depth": 5000}, 5000), ({"depth": 300, "in": "_meta"}, 300)]
    with anyio.fail_after(60):
        async with raw_session(pass_through=pass_through) as (session, layer):
            deep: list[JsonObject] = []
            for arguments, _ in calls:
                [answer] = await session.post(session.call("d__deep", arguments))
                deep.append(answer["result"])
            plain = await _result(session, "d__plain")
            if pass_through:
                assert layer.forwarded == 4
    for result, (_, depth) in zip(deep, calls, strict=True):
        assert result["content"] == too_deep(depth)
        assert result["isError"] is True
    assert plain["content"] == [{"type": "text", "text": "plain"}]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []


@pytest.mark.parametrize("era", ["legacy", "auto"])
async def test_clients_of_both_eras_get_the_error_result_over_http_and_stdio(era: str) -> None:
    config = McpServerConfig(command=sys.executable, args=[str(ODD)])
    with anyio.fail_after(60):
        async with gateway_front(config) as (url, layer, _), Client(url, mode=era) as client:
            await client.list_tools()
            over_http = await client.call_tool("d__deep", {"depth": 5000})
            after_http = await client.call_tool("d__plain", {})
            assert layer is not None
            assert layer.forwarded == 2
        async with stdio_front(config) as front, Client(front.client(), mode=era) as client:
            await client.list_tools()
            over_stdio = await client.call_tool("d__deep", {"depth": 150})
            after_stdio = await client.call_tool("d__plain", {})
            assert front.forwarded == 2
    assert over_http.is_error
    assert over_stdio.is_error
    assert over_http.model_dump(mode="json", exclude_none=True)["content"] == too_deep(5000)
    assert over_stdio.model_dump(mode="json", exclude_none=True)["content"] == too_deep(150)
    assert after_http.content == after_stdio.content == [types.TextContent(text="plain")]
