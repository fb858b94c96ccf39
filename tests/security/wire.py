"""Raw JSON-RPC to a real gateway process: bytes in, parsed messages out, both protocol eras.

`HttpWire` posts bodies to `serve --http` (a 2025-11-25 session, or 2026-07-28 stateless
requests with their headers); `stdio_wire` runs `serve --stdio` and exchanges lines.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast

import anyio
import httpx2
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from tests.server.processes import REPO, SCRIPT, stop

__all__ = [
    "ERAS",
    "LEGACY",
    "MODERN",
    "HttpAnswer",
    "HttpWire",
    "StdioWire",
    "calculate",
    "calculated",
    "initialize",
    "modern_params",
    "stdio_wire",
]

Era = Literal["2025-11-25", "2026-07-28"]
LEGACY: Era = "2025-11-25"
MODERN: Era = "2026-07-28"
ERAS: list[Era] = [LEGACY, MODERN]

MODERN_META: dict[str, Any] = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "wire", "version": "1"},
}
NAME_PARAMS = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}


def modern_params(params: dict[str, Any] | None = None) -> dict[str, Any]:
    """`params` with the 2026-07-28 per-request envelope."""
    return {**(params or {}), "_meta": MODERN_META}


def calculate(request_id: int, era: Era, expression: str = "6 * 7") -> dict[str, Any]:
    """A call of the proxied calculator, a valid request in either era."""
    params: dict[str, Any] = {"name": "calculator", "arguments": {"expression": expression}}
    if era == MODERN:
        params = modern_params(params)
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def calculated(reply: dict[str, Any] | None) -> str | None:
    """The calculator's answer in a reply to `calculate`."""
    result: dict[str, Any] = (reply or {}).get("result") or {}
    content: dict[str, Any] = result.get("structuredContent") or {}
    return content.get("response")


def initialize(request_id: int = 0) -> dict[str, Any]:
    params = {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "wire", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params}


@dataclass
class HttpAnswer:
    status: int
    messages: list[dict[str, Any]]
    """The JSON-RPC messages of the body (one JSON body, or the events of an SSE stream)."""
    text: str

    @property
    def reply(self) -> dict[str, Any] | None:
        """The response or error among the messages, if any."""
        found = [m for m in self.messages if "result" in m or "error" in m]
        return found[-1] if found else None


class HttpWire:
    """One client of `url` in `era`: a session for 2025-11-25 (opened by `open`)."""

    def __init__(self, http: httpx2.AsyncClient, url: str, era: Era) -> None:
        self.http = http
        self.url = url
        self.era = era
        self.session_id: str | None = None
        self.last_session_id: str | None = None

    async def open(self) -> None:
        if self.era == LEGACY:
            opened = await self.post(json.dumps(initialize()).encode())
            assert opened.status == 200, opened.text
            self.session_id = self.last_session_id
            done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert (await self.post(json.dumps(done).encode())).status == 202

    async def post(self, body: bytes, **headers: str) -> HttpAnswer:
        """POST `body`; the era's headers come from the body when it is a JSON object."""
        sent = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": self.era,
            **self._routing_headers(body),
            **headers,
        }
        if self.session_id is not None:
            sent["Mcp-Session-Id"] = self.session_id
        response = await self.http.post(self.url, content=body, headers=sent)
        self.last_session_id = response.headers.get("mcp-session-id")
        text = response.text
        kind = response.headers.get("content-type", "")
        if kind.startswith("text/event-stream"):
            messages = [
                json.loads(line.removeprefix("data:"))
                # SSE ends lines with CR, LF or CRLF only; `splitlines` would also split
                # inside the JSON, at U+0085, U+2028 and the like.
                for line in re.split(r"\r\n|\r|\n", text)
                if line.startswith("data:") and line.removeprefix("data:").strip()
            ]
        elif kind.startswith("application/json") and text:
            messages = [json.loads(text)]
        else:
            messages = []
        return HttpAnswer(response.status_code, messages, text)

    def _routing_headers(self, body: bytes) -> dict[str, str]:
        """2026-07-28 mirrors the method (and a tool's name) in headers that must match."""
        if self.era != MODERN:
            return {}
        try:
            decoded: Any = json.loads(body)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(decoded, dict):
            return {}
        message = cast(dict[str, Any], decoded)
        method = message.get("method")
        headers: dict[str, str] = {}
        if isinstance(method, str) and _header_safe(method):
            headers["Mcp-Method"] = method
            params = message.get("params")
            key = NAME_PARAMS.get(method)
            if key and isinstance(params, dict):
                name = cast(dict[str, Any], params).get(key)
                if isinstance(name, str) and _header_safe(name):
                    headers["Mcp-Name"] = name
        return headers


def _header_safe(value: str) -> bool:
    return all(" " <= c <= "~" for c in value) and value == value.strip()


@dataclass
class StdioWire:
    process: Process
    stdout: BufferedByteReceiveStream
    stderr: list[str] = field(default_factory=list[str])

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(line + b"\n")

    async def send_json(self, message: dict[str, Any]) -> None:
        await self.send(json.dumps(message).encode())

    async def receive(self) -> dict[str, Any]:
        """The next message the gateway writes."""
        return json.loads(await self.stdout.receive_until(b"\n", 64 * 1024 * 1024))

    async def reply_to(self, request_id: object) -> dict[str, Any]:
        """Messages until the reply to `request_id` (anything else read is dropped)."""
        while True:
            message = await self.receive()
            if message.get("id") == request_id and "method" not in message:
                return message

    async def open(self, era: Era) -> None:
        """The handshake of `era` (a `server/discover` opens a 2026-07-28 connection)."""
        if era == LEGACY:
            await self.send_json(initialize(-1))
            assert "result" in await self.reply_to(-1)
            await self.send_json({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:
            discover = {"jsonrpc": "2.0", "id": -1, "method": "server/discover"}
            await self.send_json({**discover, "params": modern_params()})
            assert "result" in await self.reply_to(-1)


@asynccontextmanager
async def stdio_wire(config: Path) -> AsyncGenerator[StdioWire]:
    """`agent-gateway serve --stdio --config CONFIG`, stopped on exit."""
    command = [str(SCRIPT), "serve", "--stdio", "--config", str(config)]
    process = await anyio.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO
    )
    assert process.stdout is not None
    assert process.stderr is not None
    wire = StdioWire(process, BufferedByteReceiveStream(process.stdout))
    stderr = process.stderr

    async def drain_stderr() -> None:
        async for chunk in stderr:
            wire.stderr.append(chunk.decode(errors="replace"))

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(drain_stderr)
            yield wire
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await stop(process)
