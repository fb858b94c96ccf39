"""A server that stops answering (server-everything over HTTP, SIGSTOPped): a resource read,
a prompt and a completion proxied to it fail within about its `timeout`, saying so; so does a
tool call to a stdio server that blocks on it. A read
is not held by listings to route it, nor any request by the SDK's courtesy cancel, whose
write to a server that reads nothing blocked for 5 s more per request."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from gateway import Gateway
from toolkits.mcp import McpServerConfig, McpToolkitGroup

from ..servers.real import everything_http
from .support import ERAS, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TIMEOUT = 2
LATE = TIMEOUT + 1.5
"""Slower than this is more than the timeout: a listing or a courtesy cancel waited first."""
DOCUMENT = "demo://resource/static/document/features.md"


@asynccontextmanager
async def stopped_server(era: str) -> AsyncGenerator[Client]:
    """A client of a gateway before server-everything over HTTP, which is stopped (SIGSTOP)
    once the gateway has connected, and continued at the end."""
    pid: list[int] = []
    async with everything_http("streamableHttp", pid=pid) as url:
        config = McpServerConfig(url=url, prefix="never", timeout=TIMEOUT, connect_timeout=30)
        async with (
            McpToolkitGroup({"everything": config}) as group,
            Client(serve(Gateway(group.nodes, []), expose_tools=True), mode=era) as client,
        ):
            os.kill(pid[0], signal.SIGSTOP)
            try:
                yield client
            finally:
                os.kill(pid[0], signal.SIGCONT)


async def timed_error(request: object) -> tuple[float, str]:
    """How long the awaitable `request` took to fail, and its error's message."""
    start = anyio.current_time()
    with pytest.raises(MCPError) as raised:
        await request  # type: ignore[misc]
    return anyio.current_time() - start, raised.value.error.message


@pytest.mark.parametrize("era", ERAS)
async def test_requests_to_a_stopped_server_fail_within_its_timeout_saying_why(era: str) -> None:
    with anyio.fail_after(90):
        async with stopped_server(era) as client:
            read = await timed_error(client.read_resource(DOCUMENT))
            again = await timed_error(client.read_resource(DOCUMENT))
            prompt = await timed_error(client.get_prompt("args-prompt", {"city": "x"}))
            ref = types.PromptReference(name="completable-prompt")
            completion = await timed_error(
                client.complete(ref, {"name": "department", "value": "E"})
            )
    did_not_answer = f"MCP server 'everything' did not answer resources/read {DOCUMENT!r}"
    for seconds, message in (read, again):
        assert seconds < LATE
        assert message == f"node 'everything' failed: {did_not_answer} within {TIMEOUT} s"
    # Never listed: the prompt's route is unknown, and the listing says why, not "no prompt".
    for (seconds, message), name in ((prompt, "args-prompt"), (completion, "completable-prompt")):
        assert seconds < LATE
        assert message == (
            f"no prompt named {name!r} is listed, and not every node could list its prompts: "
            f"node 'everything': MCP server 'everything' did not answer prompts listing "
            f"within {TIMEOUT} s"
        )


BLOCKED_STDIO = """
import json, sys, time
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message["method"]
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "blocked", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "hang", "inputSchema": {"type": "object"}}]}
    else:
        time.sleep(3600)  # the whole server blocks: it reads no more of its stdin
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


@pytest.mark.parametrize("era", ERAS)
async def test_a_call_to_a_stdio_server_that_blocks_fails_within_its_timeout(
    era: str, tmp_path: Path
) -> None:
    """A tool that blocks its whole server (it reads nothing more, not even the cancel):
    the proxied call fails within about its `timeout`, on either path."""
    script = tmp_path / "blocked.py"
    script.write_text(BLOCKED_STDIO)
    config = McpServerConfig(
        command=sys.executable, args=[str(script)], prefix="never", timeout=TIMEOUT
    )
    with anyio.fail_after(60):
        async with (
            McpToolkitGroup({"blocked": config}) as group,
            Client(serve(Gateway(group.nodes, []), expose_tools=True), mode=era) as client,
        ):
            start = anyio.current_time()
            result = await client.call_tool("hang", {})
            seconds = anyio.current_time() - start
    assert seconds < LATE
    assert result.is_error
    (said,) = result.content
    assert isinstance(said, types.TextContent)
    assert "timed out (no result or progress for 2 s)" in said.text
