"""A streamable HTTP server that restarted no longer knows the node's session (2025-11-25: it
answers 404 to a request carrying the old id). Whichever request meets that, the node
reconnects, and a catalog request (a listing, a read, a prompt, a completion, a subscription)
goes again on the new session; a tool call through the SDK client fails alone, saying so. The
GET of the server's event stream being refused makes the node find out by itself: its
subscriptions are made again and its listeners told the lists may have changed. On 2026-07-28,
which has no sessions, a restart costs no request anything."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from starlette.applications import Starlette

from tests.servers.asgi import serve_on_loopback
from tests.servers.catalog import CatalogServer
from tests.servers.restarting import Restarting
from tests.servers.updates import UpdatingServer
from toolkits import ConnectionLost
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode
from toolkits.observation import result_text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

LOST = "connection lost: the server no longer knows the session (HTTP 404)"
NOTES = "memo://notes"
ANEW = "the resources may have changed"
NONE = 405
"""The status of the event stream's GET of a server that offers none: only a request finds
its restart out."""


@asynccontextmanager
async def restarting_node(
    front: Restarting, protocol: ProtocolMode = "auto"
) -> AsyncGenerator[McpToolkit]:
    async with anyio.create_task_group() as tg:
        await tg.start(front.run)
        async with serve_on_loopback(front) as base:
            config = McpServerConfig(url=f"{base}/mcp", protocol=protocol, connect_timeout=10)
            async with McpToolkit("docs", config) as node:
                yield node
        tg.cancel_scope.cancel()


def docs_server() -> CatalogServer:
    docs = CatalogServer("docs")
    docs.add_resource("memo://docs/1", "doc 1")
    docs.add_template("memo://made/{id}", "made")
    docs.add_prompt("greet", "who")
    docs.completions["greet:who"] = ["Ada", "Alan"]
    return docs


def http_app(docs: CatalogServer | UpdatingServer) -> Callable[[], Starlette]:
    return lambda: docs.server.streamable_http_app(host="127.0.0.1")


async def resources(node: McpToolkit) -> Any:
    return [r.uri for r in await node.catalog.list_resources()]


async def templates(node: McpToolkit) -> Any:
    return [t.uri_template for t in await node.catalog.list_resource_templates()]


async def prompts(node: McpToolkit) -> Any:
    return [p.name for p in await node.catalog.list_prompts()]


async def read(node: McpToolkit) -> Any:
    return (await node.catalog.read_resource("memo://docs/1")).contents


async def prompt(node: McpToolkit) -> Any:
    return (await node.catalog.get_prompt("greet", {"who": "Ada"})).messages


async def completion(node: McpToolkit) -> Any:
    ref = types.PromptReference(name="greet")
    argument = types.CompletionArgument(name="who", value="A")
    return (await node.catalog.complete(ref, argument)).completion.values


REQUESTS: dict[str, tuple[str, Callable[[McpToolkit], Awaitable[Any]]]] = {
    "resources": ("resources/list", resources),
    "templates": ("resources/templates/list", templates),
    "prompts": ("prompts/list", prompts),
    "read": ("resources/read", read),
    "prompt": ("prompts/get", prompt),
    "completion": ("completion/complete", completion),
}


@pytest.mark.parametrize("protocol", ["auto", "modern"])
@pytest.mark.parametrize("request_name", list(REQUESTS))
async def test_a_catalog_request_after_a_restart_is_answered_on_a_new_session(
    request_name: str, protocol: ProtocolMode, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolkits.mcp.docs")
    method, request = REQUESTS[request_name]
    front = Restarting(http_app(docs_server()), event_stream=NONE)
    with anyio.fail_after(30):
        async with restarting_node(front, protocol) as node:
            before = await request(node)
            await front.restart()
            after = await request(node)
    assert after == before
    assert before  # something to compare: not an empty listing
    said = [r.getMessage() for r in caplog.records]
    if protocol == "auto":  # 2025-11-25: refused on the old session, answered on the new
        assert [status for sent, status in front.posts if sent == method] == [200, 404, 200]
        assert said.count(LOST) == 1
        assert said.count("connected (protocol 2025-11-25)") == 1
        # The return of a server whose loss was warned of is a warning too (the reconnects').
        assert [line for line in said if line.startswith("reconnected (protocol 2025-11-25)")]
    else:  # 2026-07-28: no session to forget
        assert [status for sent, status in front.posts if sent == method] == [200, 200]
        assert not any(line.startswith("connection lost") for line in said)


async def test_a_request_refused_again_on_the_new_session_is_not_sent_a_third_time() -> None:
    """A server that answers one request 404 whatever the session (no spec says so, but some
    answer a missing resource so) costs that request two sessions, not a loop."""

    def missing(message: dict[str, Any]) -> int | None:
        params: dict[str, Any] = message.get("params") or {}
        return 404 if params.get("uri") == "memo://gone" else None

    front = Restarting(http_app(docs_server()), event_stream=NONE, refuse=missing)
    with anyio.fail_after(30):
        async with restarting_node(front) as node:
            with pytest.raises(ConnectionLost) as raised:
                await node.catalog.read_resource("memo://gone")
            lost = node.health.since  # that of the state before the owner saw the loss
            await node.wait_for_health(lambda h: h.state == "ready" and h.since != lost)
            listed = await resources(node)
    assert str(raised.value) == (
        "MCP server 'docs' no longer knows the session (HTTP 404): the connection closed "
        "during resources/read 'memo://gone'; reconnecting"
    )
    assert [sent for sent in front.posts if sent[0] == "resources/read"] == [
        ("resources/read", 404)
    ] * 2
    assert listed == ["memo://docs/1"]


async def test_a_tool_call_through_the_sdk_client_fails_alone_and_the_next_is_answered() -> None:
    """Not sent again: a tool may not be safe to run twice, and a call in flight beside the
    refused request may have run."""
    front = Restarting(http_app(UpdatingServer("docs", NOTES)), event_stream=NONE)
    with anyio.fail_after(30):
        async with restarting_node(front) as node:
            node.raw_calls = False
            await node.call_tool("docs__update", {"uri": NOTES})
            await front.restart()
            with pytest.raises(ConnectionLost) as raised:
                await node.call_tool("docs__update", {"uri": NOTES})
            after = await node.call_tool("docs__update", {"uri": NOTES})
    assert str(raised.value) == (
        "MCP server 'docs' no longer knows the session (HTTP 404): the connection closed "
        "during a call to 'docs__update'; reconnecting"
    )
    assert result_text(after) == f"updated {NOTES}"


class Heard:
    """What a node's listeners heard: updated URIs and changed lists, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []
        self._changed = anyio.Event()

    async def updated(self, uri: str) -> None:
        self._note(uri)

    async def resources_changed(self, _node: str) -> None:
        self._note(ANEW)

    def _note(self, what: str) -> None:
        self.said.append(what)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, what: str, *, times: int = 1) -> None:
        while self.said.count(what) < times:
            await self._changed.wait()


@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_subscription_made_after_a_restart_is_made_on_the_new_session(
    protocol: ProtocolMode,
) -> None:
    server = UpdatingServer("docs", NOTES)
    heard = Heard()
    front = Restarting(http_app(server), event_stream=NONE)
    with anyio.fail_after(30):
        async with restarting_node(front, protocol) as node:
            await front.restart()
            await node.subscribe_resource(NOTES, heard.updated)
            if protocol == "modern":  # updates come on the listen stream
                await server.update(NOTES)
                await heard.until(NOTES)
    assert server.began[NOTES] == 1
    subscribed = [status for method, status in front.posts if method == "resources/subscribe"]
    assert subscribed == ([404, 200] if protocol == "auto" else [])


@pytest.mark.parametrize("protocol", ["auto", "modern"])
async def test_a_restart_is_found_out_with_no_request_and_the_lists_announced(
    protocol: ProtocolMode,
) -> None:
    """Its subscriptions are made again, and the node's listeners told the resources may
    have changed (a restarted server may list others, and tells no new session so)."""
    server = UpdatingServer("docs", NOTES)
    heard = Heard()
    front = Restarting(http_app(server))
    # 2026-07-28: each listen stream opened says so, the first one too.
    announced = 1 if protocol == "modern" else 0
    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            await tg.start(front.run)
            async with serve_on_loopback(front) as base:
                config = McpServerConfig(url=f"{base}/mcp", protocol=protocol)
                node = McpToolkit("docs", config)
                node.subscribe_resources(heard.resources_changed)
                async with node:
                    await node.subscribe_resource(NOTES, heard.updated)
                    await heard.until(ANEW, times=announced)
                    await front.restart()
                    await heard.until(ANEW, times=announced + 1)
                    await server.until(lambda: server.began[NOTES] == 2)
                    await server.update(NOTES)
                    await heard.until(NOTES)
            tg.cancel_scope.cancel()
    assert heard.said.count(NOTES) == 1


async def test_a_live_session_whose_event_stream_is_refused_404_is_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A GET the server has no route for (404) only raises the doubt: the node asks for its
    tools on the session, which answers, and keeps it."""
    caplog.set_level(logging.INFO, logger="toolkits.mcp.docs")
    front = Restarting(http_app(docs_server()), event_stream=404)
    with anyio.fail_after(30):
        async with restarting_node(front) as node:
            await front.until(lambda posts: posts.count(("tools/list", 200)) >= 2)
            listed = await resources(node)
    assert listed == ["memo://docs/1"]
    assert not any(status == 404 for _, status in front.posts)
    said = [r.getMessage() for r in caplog.records]
    assert said.count("connected (protocol 2025-11-25)") == 1
    assert not any(line.startswith("connection lost") for line in said)
