"""Streamable HTTP to an in-process SDK server on a loopback socket: headers, bearer token,
and the 2026-07-28 era over HTTP (which the npm servers do not speak)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
import pytest

from tests.servers.asgi import RecordHeaders, serve_on_loopback
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits.mcp import Backoff, McpServerConfig, McpToolkit, ProtocolMode

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def growing_toy() -> ToyServer:
    toy = ToyServer()
    toy.add_echo("echo")

    async def grow(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        toy.add_echo("added")
        await toy.announce_change(ctx)
        return text_result("grown")

    toy.add("grow", grow)
    return toy


@pytest.mark.parametrize("era", ["modern", "auto", "legacy"])
async def test_headers_and_bearer_token_reach_the_server_and_never_the_log(
    era: ProtocolMode, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("TOY_TOKEN", "tok-8f3a91")
    toy = growing_toy()
    app = RecordHeaders(toy.server.streamable_http_app(host="127.0.0.1"))
    changed = anyio.Event()

    async def on_change(_node: str) -> None:
        changed.set()

    async with serve_on_loopback(app) as base:
        config = McpServerConfig(
            url=f"{base}/mcp",
            headers={"X-Team": "blue"},
            bearer_token_env="TOY_TOKEN",
            protocol=era,
        )
        async with McpToolkit("toy", config) as node:
            expected = "2026-07-28" if era == "modern" else "2025-11-25"
            assert node.health.protocol_version == expected, node.health
            node.subscribe(on_change)
            echo = await node.call_tool("toy__echo", {"a": 1})
            assert echo.content == [types.TextContent(text="echo:[('a', 1)]")]
            await node.call_tool("toy__grow", {})
            with anyio.fail_after(5):
                await changed.wait()
            assert "toy__added" in {tool.name for tool in await node.list_tools()}
    assert app.seen
    assert all(seen.get("authorization") == "Bearer tok-8f3a91" for seen in app.seen)
    assert all(seen.get("x-team") == "blue" for seen in app.seen)
    assert "tok-8f3a91" not in caplog.text


async def test_an_unset_token_variable_is_a_clear_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOY_TOKEN_UNSET", raising=False)
    config = McpServerConfig(url="http://127.0.0.1:9/mcp", bearer_token_env="TOY_TOKEN_UNSET")
    async with McpToolkit("toy", config, backoff=Backoff(60)) as node:
        assert node.health.state == "failed"
        assert node.health.last_error == (
            "ConfigError: environment variable 'TOY_TOKEN_UNSET' (the bearer token of MCP server "
            "'toy') is not set"
        )
