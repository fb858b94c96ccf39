"""Proxy mode with real MCP servers as nodes: what the gateway relays is what the server sent.

server-everything (TypeScript, 2025-11-25) covers every content kind and progress;
mcp-server-time (Python, 2026-07-28) a server that stamps its own `serverInfo`. Last, both
behind the real `serve --stdio` process, with calls passed straight through and not.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from gateway import Gateway
from toolkits.mcp import McpServerConfig, McpToolkitGroup

from ..servers.real import everything_stdio, time_stdio
from .processes import REPO, SCRIPT
from .support import ERAS, ProgressLog, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SERVER_INFO = "io.modelcontextprotocol/serverInfo"

EVERYTHING_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get-tiny-image", {}),
    ("get-annotated-message", {"messageType": "success", "includeImage": True}),
    ("get-resource-links", {"count": 2}),
    ("get-structured-content", {"location": "Chicago"}),
    ("get-sum", {"a": 1, "b": "not a number"}),  # an is_error result
]


@asynccontextmanager
async def proxied(name: str, config: McpServerConfig, era: str) -> AsyncGenerator[Client]:
    """A client of a gateway serving the one node's tools (in process)."""
    with anyio.fail_after(30):
        async with (
            McpToolkitGroup({name: config}) as group,
            Client(serve(Gateway(group.nodes, []), expose_tools=True), mode=era) as client,
        ):
            yield client


def direct(config: McpServerConfig, era: str) -> Client:
    assert config.command is not None
    return Client(StdioServerParameters(command=config.command, args=config.args), mode=era)


def without_stamp(meta: dict[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (meta or {}).items() if k != SERVER_INFO}


@pytest.mark.parametrize("era", ERAS)
async def test_every_content_kind_arrives_as_the_server_sent_it(era: str) -> None:
    config = everything_stdio()
    async with direct(config, era) as server:
        expected = [await server.call_tool(tool, args) for tool, args in EVERYTHING_CALLS]
    async with proxied("everything", config, era) as gateway:
        names = {t.name for t in (await gateway.list_tools()).tools}
        got = [
            await gateway.call_tool(f"everything__{tool}", args) for tool, args in EVERYTHING_CALLS
        ]
    assert {f"everything__{tool}" for tool, _ in EVERYTHING_CALLS} <= names
    for (tool, _), want, have in zip(EVERYTHING_CALLS, expected, got, strict=True):
        assert have.content == want.content, tool
        assert have.structured_content == want.structured_content, tool
        assert have.is_error == want.is_error, tool
        assert without_stamp(have.meta) == without_stamp(want.meta), tool
    assert got[-1].is_error
    assert any(isinstance(block, types.ImageContent) for block in got[0].content)
    assert any(isinstance(block, types.ResourceLink) for block in got[2].content)


@pytest.mark.parametrize("era", ERAS)
async def test_an_embedded_resource_arrives_whole(era: str) -> None:
    # Its blob is made per call (it holds the time), so it is checked on its own.
    args = {"resourceType": "Blob", "resourceId": 2}
    async with proxied("everything", everything_stdio(), era) as gateway:
        result = await gateway.call_tool("everything__get-resource-reference", args)
    [embedded] = [b for b in result.content if isinstance(b, types.EmbeddedResource)]
    assert isinstance(embedded.resource, types.BlobResourceContents)
    assert embedded.resource.uri == "demo://resource/dynamic/blob/2"
    assert base64.b64decode(embedded.resource.blob).startswith(b"Resource 2: This is a base64 blob")


@pytest.mark.parametrize("era", ERAS)
async def test_the_servers_progress_passes_through(era: str) -> None:
    progress = ProgressLog()
    async with proxied("everything", everything_stdio(), era) as gateway:
        result = await gateway.call_tool(
            "everything__trigger-long-running-operation",
            {"duration": 0.2, "steps": 2},
            progress_callback=progress,
        )
    assert not result.is_error
    assert [(done, total) for done, total, _ in progress.updates] == [(1, 2), (2, 2)]


@pytest.mark.parametrize("era", ERAS)
async def test_a_modern_servers_result_carries_our_stamp_not_its_own(era: str) -> None:
    args = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    config = time_stdio()
    async with direct(config, era) as server:
        want = await server.call_tool("convert_time", args)
    async with proxied("time", config, era) as gateway:
        have = await gateway.call_tool("time__convert_time", args)
    assert have.content == want.content
    assert have.structured_content == want.structured_content
    stamp = (have.meta or {}).get(SERVER_INFO)
    if era == "legacy":
        assert stamp is None
    else:
        assert stamp is not None
        assert stamp["name"] == "agent-gateway"


def _served_over_stdio(directory: Path, *, pass_through: bool) -> StdioServerParameters:
    """The real `agent-gateway serve --stdio` in front of server-everything and mcp-server-time
    over stdio."""
    everything, time = everything_stdio(), time_stdio()
    config = directory / f"gateway-{pass_through}.toml"
    config.write_text(
        f"[gateway]\nexpose_tools = true\npass_through = {str(pass_through).lower()}\n"
        f"[mcpServers.everything]\ncommand = {json.dumps(everything.command)}\n"
        f"args = {json.dumps(everything.args)}\n"
        f"[mcpServers.time]\ncommand = {json.dumps(time.command)}\n"
        f"args = {json.dumps(time.args)}\n"
    )
    return StdioServerParameters(
        command=str(SCRIPT), args=["serve", "--stdio", "--config", str(config)], cwd=str(REPO)
    )


async def test_through_a_real_stdio_front_calls_answer_alike_with_and_without_pass_through(
    tmp_path: Path,
) -> None:
    """A handshake-era client (as Claude Desktop) of `serve --stdio`: each call of a real server
    answers the same whether the gateway passes it through or not (results, progress)."""
    calls = [
        *((f"everything__{tool}", args) for tool, args in EVERYTHING_CALLS),
        ("everything__trigger-long-running-operation", {"duration": 0.2, "steps": 2}),
        (
            "time__convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        ),
    ]
    answers: dict[bool, list[tuple[Any, ...]]] = {}
    for pass_through in (True, False):
        with anyio.fail_after(60):
            async with Client(
                _served_over_stdio(tmp_path, pass_through=pass_through), mode="legacy"
            ) as gateway:
                await gateway.list_tools()
                answers[pass_through] = []
                for tool, args in calls:
                    progress = ProgressLog()
                    result = await gateway.call_tool(tool, args, progress_callback=progress)
                    dumped = result.model_dump(by_alias=True, exclude_none=True)
                    answers[pass_through].append((tool, dumped, progress.updates))
    assert answers[True] == answers[False]
    by_tool = {tool: (result, updates) for tool, result, updates in answers[True]}
    assert by_tool["everything__get-sum"][0]["isError"] is True
    assert [u[:2] for u in by_tool["everything__trigger-long-running-operation"][1]] == [
        (1, 2),
        (2, 2),
    ]
    assert "_meta" not in by_tool["time__convert_time"][0]  # the server's stamp, removed
