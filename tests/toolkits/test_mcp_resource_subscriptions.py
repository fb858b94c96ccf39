"""McpToolkit.subscribe_resource against an SDK server in-process, in both protocol eras."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from tests.servers.inprocess import CrashableTransport
from tests.servers.updates import UpdatingServer
from toolkits.errors import NotOffered
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

pytestmark = pytest.mark.anyio

ERAS: list[ProtocolMode] = ["legacy", "modern"]
NOTES = "memo://notes"
TODO = "memo://todo"


def config(**keys: Any) -> McpServerConfig:
    return McpServerConfig(command="in-process", **keys)


class Updates:
    """A subscriber: the URIs it was told were updated, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._changed = anyio.Event()

    async def __call__(self, uri: str) -> None:
        self.uris.append(uri)
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, *uris: str) -> None:
        """Wait until it heard exactly `uris` (more would fail the caller's assert later)."""
        while len(self.uris) < len(uris):
            await self._changed.wait()
        assert self.uris == list(uris)


@pytest.mark.parametrize("era", ERAS)
async def test_two_subscribers_share_one_subscription_at_the_server(era: ProtocolMode) -> None:
    server = UpdatingServer("docs", NOTES)
    first, second = Updates(), Updates()
    async with McpToolkit("docs", config(protocol=era), target=server.server) as node:
        with anyio.fail_after(10):
            stop_first = await node.subscribe_resource(NOTES, first)
            stop_second = await node.subscribe_resource(NOTES, second)
            await server.update(NOTES)
            await first.until(NOTES)
            await second.until(NOTES)

            await stop_first()
            await stop_first()  # again: nothing
            assert server.ended[NOTES] == 0
            await server.update(NOTES)
            await second.until(NOTES, NOTES)

            await stop_second()
            await server.until(lambda: server.ended[NOTES] == 1)
    assert first.uris == [NOTES]
    assert server.began[NOTES] == 1
    assert server.ended[NOTES] == 1


@pytest.mark.parametrize("era", ERAS)
async def test_an_update_reaches_only_the_subscribers_of_its_uri(era: ProtocolMode) -> None:
    server = UpdatingServer("docs", NOTES, TODO)
    notes, todo = Updates(), Updates()
    async with McpToolkit("docs", config(protocol=era), target=server.server) as node:
        with anyio.fail_after(10):
            await node.subscribe_resource(NOTES, notes)
            stop_todo = await node.subscribe_resource(TODO, todo)
            await server.update(NOTES)
            await server.update(TODO)
            await notes.until(NOTES)
            await todo.until(TODO)  # after NOTES's: that one did not reach it
            await stop_todo()
            await server.update(TODO)
            await server.update(NOTES)
            await notes.until(NOTES, NOTES)
    assert todo.uris == [TODO]


@pytest.mark.parametrize("era", ERAS)
async def test_one_callback_subscribed_twice_is_told_once(era: ProtocolMode) -> None:
    server = UpdatingServer("docs", NOTES, TODO)
    heard = Updates()
    async with McpToolkit("docs", config(protocol=era), target=server.server) as node:
        with anyio.fail_after(10):
            stop = await node.subscribe_resource(NOTES, heard)
            stop_again = await node.subscribe_resource(NOTES, heard)
            await server.update(NOTES)
            await stop()
            await server.update(NOTES)
            await heard.until(NOTES, NOTES)
            await stop_again()
    assert heard.uris == [NOTES, NOTES]


async def test_an_update_under_a_subscribed_uri_reaches_its_subscriber() -> None:
    server = UpdatingServer("docs", NOTES)
    heard = Updates()
    async with McpToolkit("docs", config(protocol="legacy"), target=server.server) as node:
        with anyio.fail_after(10):
            await node.subscribe_resource(NOTES, heard)
            await server.update(f"{NOTES}/2026", under=NOTES)
            await server.update(f"{NOTES}2", under=NOTES)  # not under it: a different URI
            await server.update(NOTES)
            await heard.until(f"{NOTES}/2026", NOTES)


@pytest.mark.parametrize("era", ERAS)
async def test_the_subscriptions_are_made_again_after_a_reconnect(era: ProtocolMode) -> None:
    server = UpdatingServer("docs", NOTES)
    crashable = CrashableTransport(server.server)
    heard = Updates()
    async with McpToolkit("docs", config(protocol=era), target=crashable.connect) as node:
        with anyio.fail_after(10):
            await node.subscribe_resource(NOTES, heard)
            crashable.crash()
            await server.until(lambda: server.began[NOTES] == 2)
            await server.update(NOTES)
            await heard.until(NOTES)
    assert crashable.connections == 2


async def test_a_listen_stream_the_server_ends_is_opened_again() -> None:
    server = UpdatingServer("docs", NOTES)
    heard = Updates()
    async with McpToolkit("docs", config(protocol="modern"), target=server.server) as node:
        with anyio.fail_after(10):
            await node.subscribe_resource(NOTES, heard)
            server.end_streams()
            await server.until(lambda: server.began[NOTES] == 2)
            await server.update(NOTES)
            await heard.until(NOTES)
    assert server.ended[NOTES] >= 1


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_without_subscriptions_says_so(era: ProtocolMode) -> None:
    server = UpdatingServer("docs", NOTES, subscribe=False)
    async with McpToolkit("docs", config(protocol=era), target=server.server) as node:
        # Without discovery (`protocol = "modern"`) the capabilities are unknown: it asks.
        assert node.offers_resource_subscriptions == (era == "modern")
        with anyio.fail_after(10), pytest.raises(NotOffered, match="'docs' does not offer"):
            await node.subscribe_resource(NOTES, Updates())
