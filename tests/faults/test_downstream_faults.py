"""A downstream server that misbehaves over HTTP fails its own calls, clearly, and nothing else.

The server is a real HTTP endpoint on 127.0.0.1 in front of an SDK server: it passes the
handshake and the tool list through, then answers `tools/call` in one broken way per test
(a 500, garbage instead of JSON, a stream cut off mid-event). Each call ends within its
bound with an error that says what happened, and a healthy node beside it keeps working.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.servers.asgi import buffered_body, serve_on_loopback
from tests.servers.inprocess import ToyServer
from toolkits import FunctionToolkit, ToolkitError, calculator
from toolkits.mcp import McpServerConfig, McpToolkit

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

Send = Any


class BreaksCalls:
    """ASGI middleware: every `tools/call` POST is answered the way `mode` says."""

    def __init__(self, app: Any, mode: str) -> None:
        self.app = app
        self.mode = mode
        self.calls = 0

    async def __call__(self, scope: Any, receive: Any, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await buffered_body(receive)
        if b'"tools/call"' not in body:
            await self.app(scope, replay, send)
            return
        self.calls += 1
        request_id = json.loads(body)["id"]
        await self._break(send, request_id)

    async def _break(self, send: Send, request_id: Any) -> None:
        if self.mode == "500":
            await _respond(send, 500, "text/plain", b"Internal Server Error")
        elif self.mode == "garbage":
            await _respond(send, 200, "application/json", b"{this is not json")
        elif self.mode == "truncated":
            whole: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "result": {"content": []}}
            start = "event: message\ndata: " + json.dumps(whole)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")],
                }
            )
            await send(
                {"type": "http.response.body", "body": start.encode()[:40], "more_body": True}
            )
            # The connection ends here: the event never completes.
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _respond(send: Send, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _call_or_error(node: McpToolkit) -> str:
    """What the failed call said: its error result, or the node's error (server unusable)."""
    try:
        result = await node.call_tool("toy__echo", {})
    except ToolkitError as exc:
        return str(exc)
    assert result.is_error, result
    return str(result.content)


@pytest.mark.parametrize("mode", ["500", "garbage", "truncated"])
@pytest.mark.parametrize("era", ["legacy", "modern"])
async def test_a_broken_answer_fails_that_call_clearly(mode: str, era: str) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    app = BreaksCalls(toy.server.streamable_http_app(host="127.0.0.1"), mode)
    local = FunctionToolkit("calculator", [calculator])
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era, timeout=10)  # type: ignore[arg-type]
        async with McpToolkit("toy", config) as node:
            with anyio.fail_after(30):
                for _ in range(3):
                    said = await _call_or_error(node)
                    assert said, "a failed call must say why"
                    (sum_,) = (await local.call_tool("calculator", {"expression": "1 + 1"})).content
                    assert getattr(sum_, "text", None) == "2"
    assert app.calls >= 1
