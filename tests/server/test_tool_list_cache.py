"""A 2026-07-28 `tools/list` over HTTP is the SDK's own answer again, byte for byte, until the
served tools change; then the change shows at once."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest

from gateway import Gateway
from gateway.server import HttpOptions, http_app
from gateway.server.served.tool_list_cache import ToolListCache
from tests.servers.asgi import serve_on_loopback
from tests.servers.inprocess import ToyServer
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import serve
from .test_pass_through_sessions import RawSession

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ENVELOPE: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


async def _list(
    http: httpx2.AsyncClient,
    url: str,
    request_id: Any,
    status: int = 200,
    meta: dict[str, Any] | None = None,
    **params: Any,
) -> bytes:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/list"}
    body["params"] = {"_meta": {**ENVELOPE, **(meta or {})}, **params}
    headers = {
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/list",
        "accept": "application/json, text/event-stream",
    }
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == status, response.text
    return response.content


def _names(body: bytes) -> list[str]:
    return [tool["name"] for tool in json.loads(body)["result"]["tools"]]


async def test_a_listing_is_answered_again_until_the_tools_change() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    config = McpServerConfig(command="in-process")
    with anyio.fail_after(30):
        async with McpToolkit("toy", config, target=toy.server) as node:
            app = http_app(
                serve(Gateway([node], []), expose_tools=True), HttpOptions("127.0.0.1", 0)
            )
            (cache,) = [layer for layer in app.state.layers if isinstance(layer, ToolListCache)]
            async with serve_on_loopback(app) as base, httpx2.AsyncClient() as http:
                url = f"{base}/mcp"
                first = await _list(http, url, 1)
                again = await _list(http, url, "two")
                # Not the cache's: the SDK's server refuses a cursor (the gateway never pages).
                paged = await _list(http, url, 3, 400, cursor="x")
                toy.add_echo("added")
                await node.refresh_tools()
                changed = await _list(http, url, 4)
                changed_again = await _list(http, url, 5)
    assert cache.reused == 2  # `again` and `changed_again`
    assert again == first.replace(b'"id":1,', b'"id":"two",', 1)
    assert _names(first) == ["toy__echo"]
    assert _names(changed) == ["toy__echo", "toy__added"]
    assert changed_again == changed.replace(b'"id":4,', b'"id":5,', 1)
    assert json.loads(paged)["id"] == 3
    assert json.loads(paged)["error"]["code"] == -32602


async def test_a_sessions_listing_is_answered_again_for_its_version_until_the_tools_change() -> (
    None
):
    toy = ToyServer()
    toy.add_echo("echo")
    config = McpServerConfig(command="in-process")
    listing = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    heard: list[list[dict[str, Any]]] = []
    with anyio.fail_after(30):
        async with McpToolkit("toy", config, target=toy.server) as node:
            app = http_app(
                serve(Gateway([node], []), expose_tools=True), HttpOptions("127.0.0.1", 0)
            )
            (cache,) = [layer for layer in app.state.layers if isinstance(layer, ToolListCache)]
            async with serve_on_loopback(app) as base, httpx2.AsyncClient() as http:
                for version in ("2025-11-25", "2025-11-25", "2025-03-26", "2025-03-26", "new"):
                    if version == "new":
                        toy.add_echo("added")
                        await node.refresh_tools()
                        version = "2025-11-25"
                    session = RawSession(http, f"{base}/mcp", version)
                    await session.open()
                    heard.append(await session.post(listing))
                    paged = {**listing, "params": {"cursor": "x"}}  # the SDK's to refuse
                    [refused] = await session.post(paged)
                    assert (refused["id"], refused["error"]["code"]) == (7, -32602)
                    assert await session.delete() == 200
    assert cache.reused == 2  # the second session of each version
    assert heard[1] == heard[0]  # ours (JSON) is the SDK's (an event stream) again
    assert heard[3] == heard[2]
    assert [tool["name"] for tool in heard[0][0]["result"]["tools"]] == ["toy__echo"]
    assert [tool["name"] for tool in heard[4][0]["result"]["tools"]] == ["toy__echo", "toy__added"]


def _traced(number: int) -> dict[str, str]:
    """A W3C trace context of its own, as an instrumented client sends with each request."""
    return {
        "traceparent": f"00-{number:032x}-{number:016x}-01",
        "tracestate": f"vendor=v{number}",
        "baggage": f"request={number}",
    }


async def test_a_listing_with_a_trace_context_of_its_own_is_answered_again() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    config = McpServerConfig(command="in-process")
    declaring: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}}
    with anyio.fail_after(30):
        async with McpToolkit("toy", config, target=toy.server) as node:
            app = http_app(
                serve(Gateway([node], []), expose_tools=True), HttpOptions("127.0.0.1", 0)
            )
            (cache,) = [layer for layer in app.state.layers if isinstance(layer, ToolListCache)]
            async with serve_on_loopback(app) as base, httpx2.AsyncClient() as http:
                url = f"{base}/mcp"
                first = await _list(http, url, 1, meta=_traced(1))
                traced = [await _list(http, url, n, meta=_traced(n)) for n in (2, 3)]
                untraced = await _list(http, url, 4)
                reused = cache.reused
                # Another envelope may change the answer: not this one's.
                other = await _list(http, url, 5, meta={**declaring, **_traced(5)})
    assert reused == 3  # `traced` and `untraced`
    assert cache.reused == reused
    assert traced == [first.replace(b'"id":1,', f'"id":{n},'.encode(), 1) for n in (2, 3)]
    assert untraced == first.replace(b'"id":1,', b'"id":4,', 1)
    assert _names(other) == _names(first) == ["toy__echo"]
