"""A result through a node whose calls take the SDK's path (an SSE server's, or an HTTP one's
call made again after the server forgot the session) is the server's intact: no `isError`
the server did not send, and one it sent kept.

Before (QA round 7), every such result gained `"isError": false`: the SDK's model defaults it,
and its dump wrote the default.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
import pytest

from tests.servers.inprocess import Context, ToyServer
from tests.servers.real import everything_http
from toolkits.mcp import McpServerConfig

from .stdio_fronts import StdioFront, stdio_front

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
LEGACY, MODERN = "2025-11-25", "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
}


async def _open(front: StdioFront, era: str) -> None:
    if era == LEGACY:
        params: JsonObject = {"protocolVersion": LEGACY, "capabilities": {}}
        params["clientInfo"] = {"name": "raw", "version": "1"}
        await front.send({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
    else:
        discover = {"jsonrpc": "2.0", "id": 0, "method": "server/discover"}
        await front.send({**discover, "params": {"_meta": MODERN_META}})
    while (await front.receive()).get("id") != 0:
        pass
    if era == LEGACY:
        await front.send({"jsonrpc": "2.0", "method": "notifications/initialized"})


async def _result(front: StdioFront, era: str, request_id: int, name: str, **args: Any) -> bytes:
    """The raw `result` of a call, as the line carries it."""
    params: JsonObject = {"name": name, "arguments": args}
    if era == MODERN:
        params["_meta"] = MODERN_META
    await front.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})
    while True:
        line = await front.line()
        if json.loads(line).get("id") == request_id:
            prefix = b'{"jsonrpc":"2.0","id":%d,"result":' % request_id
            assert line.startswith(prefix), line
            assert line.endswith(b"}"), line
            return line[len(prefix) : -1]


def _without_envelope(result: bytes) -> JsonObject:
    """The result's fields but a 2026-07-28 result's own (`resultType`, our `serverInfo`)."""
    fields: JsonObject = json.loads(result)
    fields.pop("resultType", None)
    fields.pop("_meta", None)
    return fields


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_an_sse_servers_result_comes_through_as_it_sent_it(era: str) -> None:
    async with (
        everything_http("sse") as url,
        stdio_front(McpServerConfig(transport="sse", url=url)) as front,
    ):
        with anyio.fail_after(30):
            await _open(front, era)
            echo = await _result(front, era, 1, "d__echo", message="a")
            weather = await _result(front, era, 2, "d__get-structured-content", location="Chicago")
    assert front.forwarded == 0  # the SDK's path: SSE calls are not passed through
    if era == LEGACY:  # nothing of ours in it: the server's, byte for byte (in our key order)
        assert echo == b'{"content":[{"text":"Echo: a","type":"text"}]}'
    assert _without_envelope(echo) == {"content": [{"type": "text", "text": "Echo: a"}]}
    structured = {"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82}
    assert _without_envelope(weather) == {
        "content": [{"type": "text", "text": json.dumps(structured, separators=(",", ":"))}],
        "structuredContent": structured,
    }


@pytest.mark.parametrize("era", [LEGACY, MODERN])
async def test_an_is_error_the_server_sent_is_kept(era: str) -> None:
    toy = ToyServer()

    async def said(_ctx: Context, args: dict[str, Any]) -> types.CallToolResult:
        content: list[types.ContentBlock] = [types.TextContent(text="said")]
        return types.CallToolResult(content=content, is_error=bool(args["error"]))

    toy.add("said", said)
    config = McpServerConfig(command="in-process")
    async with stdio_front(config, pass_through=False, target=toy.server) as front:
        with anyio.fail_after(30):
            await _open(front, era)
            fine = await _result(front, era, 1, "d__said", error=False)
            failed = await _result(front, era, 2, "d__said", error=True)
    assert _without_envelope(fine) == {
        "content": [{"type": "text", "text": "said"}],
        "isError": False,
    }
    assert _without_envelope(failed) == {
        "content": [{"type": "text", "text": "said"}],
        "isError": True,
    }


async def test_the_call_made_again_after_the_server_forgot_the_session_is_as_sent() -> None:
    """server-everything restarted on its port: it answers the old session id with 400, and
    the node makes the call again on a new session, through the SDK's path."""
    gone = anyio.Event()

    async def serve(
        port: int, stop: anyio.Event, *, task_status: anyio.abc.TaskStatus[str]
    ) -> None:
        async with everything_http("streamableHttp", port) as url:
            task_status.started(url)
            await stop.wait()
        gone.set()

    echoes: list[bytes] = []
    async with anyio.create_task_group() as tg:
        first, second = anyio.Event(), anyio.Event()
        url = await tg.start(serve, 0, first)
        async with stdio_front(McpServerConfig(url=url)) as front:
            with anyio.fail_after(60):
                await _open(front, LEGACY)
                echoes.append(await _result(front, LEGACY, 1, "d__echo", message="a"))
                first.set()
                await gone.wait()  # its process ended: the port is free for the next one
                await tg.start(serve, int(url.rsplit(":", 1)[1].split("/")[0]), second)
                echoes.append(await _result(front, LEGACY, 2, "d__echo", message="a"))
                echoes.append(await _result(front, LEGACY, 3, "d__echo", message="a"))
        second.set()
    assert echoes == [b'{"content":[{"text":"Echo: a","type":"text"}]}'] * 3
