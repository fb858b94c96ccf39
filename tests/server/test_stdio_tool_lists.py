"""A first-page `tools/list` over stdio is the SDK's own answer again, byte for byte (its id
replaced), until the served tools change; then the change shows at once. In both eras, and
with the pass-through off as on (`served/stdio_shortcut.py`; the HTTP twin:
`test_tool_list_cache`)."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from tests.servers.inprocess import ToyServer
from toolkits.mcp import McpServerConfig

from .stdio_fronts import StdioFront, stdio_front

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

JsonObject = dict[str, Any]
ENVELOPE: JsonObject = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


class Lines:
    """A client speaking raw lines; each answer as the bytes of its line."""

    def __init__(self, front: StdioFront, modern: bool) -> None:
        self.front = front
        self.modern = modern

    async def open(self, version: str = "2025-11-25") -> None:
        if self.modern:
            await self.ask(0, "server/discover")
            return
        client = {"name": "raw", "version": "1"}
        params = {"protocolVersion": version, "capabilities": {}, "clientInfo": client}
        await self.ask(0, "initialize", params)
        await self.front.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def ask(self, request_id: Any, method: str, params: JsonObject | None = None) -> bytes:
        params = dict(params or {})
        if self.modern:
            params["_meta"] = {**ENVELOPE, **params.get("_meta", {})}
        await self.front.send(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        while True:
            line = await self.front.line()
            message = json.loads(line)
            if "method" not in message and message.get("id") == request_id:
                return line


def _names(line: bytes) -> list[str]:
    return [tool["name"] for tool in json.loads(line)["result"]["tools"]]


@pytest.mark.parametrize("modern", [False, True], ids=["2025-11-25", "2026-07-28"])
@pytest.mark.parametrize("pass_through", [True, False])
async def test_a_listing_is_answered_again_until_the_tools_change(
    modern: bool, pass_through: bool
) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    config = McpServerConfig(command="in-process")
    with anyio.fail_after(30):
        async with stdio_front(config, pass_through=pass_through, target=toy.server) as front:
            lines = Lines(front, modern)
            await lines.open()
            first = await lines.ask(1, "tools/list")
            again = await lines.ask("two", "tools/list")
            paged = await lines.ask(3, "tools/list", {"cursor": "x"})  # the SDK judges a cursor
            toy.add_echo("added")
            await front.node.refresh_tools()
            changed = await lines.ask(4, "tools/list")
            changed_again = await lines.ask(5, "tools/list")
            assert front.shortcut.reused == 2  # `again` and `changed_again`
    assert again == first.replace(b'"id":1,', b'"id":"two",', 1)
    assert _names(first) == ["d__echo"]
    assert _names(changed) == ["d__echo", "d__added"]
    assert changed_again == changed.replace(b'"id":4,', b'"id":5,', 1)
    assert json.loads(paged)["id"] == 3


async def test_a_listing_with_a_trace_context_of_its_own_is_answered_again() -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    config = McpServerConfig(command="in-process")
    with anyio.fail_after(30):
        async with stdio_front(config, pass_through=True, target=toy.server) as front:
            lines = Lines(front, modern=True)
            await lines.open()
            first = await lines.ask(1, "tools/list")
            for number in (2, 3):
                traceparent = f"00-{number:032x}-{number:016x}-01"
                meta = {"traceparent": traceparent, "baggage": f"n={number}"}
                line = await lines.ask(number, "tools/list", {"_meta": meta})
                assert line == first.replace(b'"id":1,', f'"id":{number},'.encode(), 1)
            assert front.shortcut.reused == 2
