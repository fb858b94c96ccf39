"""A node's own POSTs (listings, calls, the handshake) on the lean client below httpx2: used
in both eras, a cancelled call still ends on the server, and httpx2's read timeout holds."""

from __future__ import annotations

import anyio
import httpx2
import pytest

from tests.servers.asgi import RecordHeaders, serve_on_loopback
from tests.servers.inprocess import ToyServer
from tests.servers.scripted_http import scripted
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.mcp.lean_http import LeanHttp
from toolkits.mcp.lean_transport import LeanPosts
from toolkits.mcp.sent_credentials import SentCredentials

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_a_nodes_posts_go_out_on_the_lean_client_and_a_cancelled_call_ends(
    era: ProtocolMode,
) -> None:
    toy = ToyServer()
    toy.add_echo("echo")
    started, cancelled = toy.add_hanging("hang")
    app = RecordHeaders(toy.server.streamable_http_app(host="127.0.0.1"))
    async with serve_on_loopback(app) as base:
        config = McpServerConfig(url=f"{base}/mcp", protocol=era)
        async with McpToolkit("toy", config) as node:
            for n in range(3):
                result = await node.call_tool("toy__echo", {"n": n})
                assert result.content[0].model_dump()["text"] == f"echo:[('n', {n})]"
            with anyio.fail_after(10):
                async with anyio.create_task_group() as tg:
                    no_arguments: dict[str, object] = {}
                    tg.start_soon(node.call_tool, "toy__hang", no_arguments)
                    await started.wait()
                    tg.cancel_scope.cancel()
                # 2026-07-28 has no cancel notification: only the stream's end tells the
                # server, so the connection must be closed, not drained.
                await cancelled.wait()
            result = await node.call_tool("toy__echo", {"n": "after"})
            assert not result.is_error
    agents = [
        (method, seen["user-agent"]) for method, seen in zip(app.methods, app.seen, strict=True)
    ]
    assert {agent for method, agent in agents if method == "POST"} == {"agent-gateway"}  # lean's
    assert all(agent.startswith("python-httpx") for method, agent in agents if method != "POST")


def client(url: str, lean: LeanHttp, seen: list[str]) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=LeanPosts(
            httpx2.AsyncHTTPTransport(),
            lean,
            url,
            lambda r: seen.append(r.method),
            node="toy",
            sent=SentCredentials(),
        ),
        timeout=httpx2.Timeout(5.0, read=0.2),
    )


@pytest.mark.parametrize(
    "answer",
    [
        [],  # no head
        [
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        ],
        [b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhalf"],
    ],
    ids=["head", "stream", "sized-body"],
)
async def test_an_answer_that_stalls_past_the_read_timeout_raises_httpx2s_error(
    answer: list[bytes],
) -> None:
    seen: list[str] = []
    async with scripted(answer) as server, LeanHttp(server.url, {}) as lean:
        async with client(server.url, lean, seen) as http:
            with anyio.fail_after(5), pytest.raises(httpx2.ReadTimeout):
                async with http.stream("POST", server.url, content=b"{}") as response:
                    await response.aread()
        assert lean.opened == 1
        assert lean.idle == 0  # a connection whose answer stalled is not kept
    assert seen == ["POST"]
