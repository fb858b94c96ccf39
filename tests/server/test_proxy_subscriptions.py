"""Proxy mode: clients subscribe to the nodes' resources through the gateway, in both eras.

A 2025-11-25 client subscribes with `resources/subscribe` and hears
`notifications/resources/updated`; a 2026-07-28 client names the URIs in its
`subscriptions/listen` stream and hears the updates there. The downstream server is asked
once per URI however many clients follow it, in either of its own eras.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from gateway import Gateway
from tests.servers.updates import UpdatingServer
from toolkits.mcp import McpServerConfig, McpToolkit, ProtocolMode

from .proxying import Follower
from .support import ERAS, serve

pytestmark = pytest.mark.anyio

NOTES = "memo://notes"
TODO = "memo://todo"
DOWN: list[ProtocolMode] = ["legacy", "modern"]


@asynccontextmanager
async def gateway_over(
    downstream: UpdatingServer, down: ProtocolMode
) -> AsyncGenerator[Server[Any]]:
    config = McpServerConfig(command="in-process", protocol=down)
    async with McpToolkit("docs", config, target=downstream.server) as node:
        yield serve(Gateway([node], []), expose_tools=True)


@asynccontextmanager
async def two_followers(
    downstream: UpdatingServer, down: ProtocolMode, era: str
) -> AsyncGenerator[tuple[Follower, Follower]]:
    """Two clients of one gateway in front of `downstream`, in `era`."""
    one, two = Follower(), Follower()
    async with (
        gateway_over(downstream, down) as server,
        one.connected(server, era),
        two.connected(server, era),
    ):
        yield one, two


@pytest.mark.parametrize("down", DOWN)
@pytest.mark.parametrize("era", ERAS)
async def test_an_update_reaches_only_the_clients_that_follow_its_resource(
    era: str, down: ProtocolMode
) -> None:
    downstream = UpdatingServer("docs", NOTES, TODO)
    async with two_followers(downstream, down, era) as (notes, todo):
        with anyio.fail_after(10):
            await notes.follow(NOTES)
            await todo.follow(TODO)
            await downstream.update(NOTES)
            await downstream.update(TODO)
            await notes.until(NOTES)
            await todo.until(TODO)  # and not NOTES before it


@pytest.mark.parametrize("down", DOWN)
@pytest.mark.parametrize("era", ERAS)
async def test_the_server_is_subscribed_once_while_any_client_follows(
    era: str, down: ProtocolMode
) -> None:
    downstream = UpdatingServer("docs", NOTES, TODO)
    async with two_followers(downstream, down, era) as (one, two):
        with anyio.fail_after(10):
            await one.follow(TODO, NOTES)
            await two.follow(NOTES)
            assert downstream.began[NOTES] == 1
            await downstream.update(NOTES)
            await one.until(NOTES)
            await two.until(NOTES)

            await one.stop(NOTES, still=(TODO,))
            assert downstream.ended[NOTES] == 0
            await downstream.update(NOTES)
            await downstream.update(TODO)
            await two.until(NOTES, NOTES)
            await one.until(NOTES, TODO)  # not the second NOTES

            await two.stop(NOTES)
            await downstream.until(lambda: downstream.ended[NOTES] == 1)
    assert downstream.began[NOTES] == 1


@pytest.mark.parametrize("era", ERAS)
async def test_a_client_that_leaves_lets_go_of_what_it_followed(era: str) -> None:
    downstream = UpdatingServer("docs", NOTES)
    one, two = Follower(), Follower()
    async with gateway_over(downstream, "legacy") as server:
        with anyio.fail_after(10):
            async with two.connected(server, era):
                async with one.connected(server, era):
                    await one.follow(NOTES)
                    await two.follow(NOTES)
                assert downstream.ended[NOTES] == 0  # `two` still follows it
                await downstream.update(NOTES)
                await two.until(NOTES)
            await downstream.until(lambda: downstream.ended[NOTES] == 1)
    assert downstream.began[NOTES] == 1
    assert one.heard == []


@pytest.mark.parametrize("era", ERAS)
async def test_subscriptions_are_announced_only_when_a_server_offers_them(era: str) -> None:
    offering, silent = UpdatingServer("docs", NOTES), UpdatingServer("docs", NOTES, subscribe=False)
    async with gateway_over(offering, "legacy") as server, Client(server, mode=era) as client:
        resources = client.server_capabilities.resources
        assert resources is not None
        assert resources.subscribe
    async with gateway_over(silent, "legacy") as server, Client(server, mode=era) as client:
        resources = client.server_capabilities.resources
        assert resources is not None
        assert not resources.subscribe
        with anyio.fail_after(10):
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                async with client.listen(resource_subscriptions=[NOTES]) as subscription:
                    assert not subscription.honored.resource_subscriptions
            else:  # as the server answers it directly: no such method
                with pytest.raises(MCPError, match="Method not found") as refused:
                    await client.session.send_request(
                        types.SubscribeRequest(params=types.SubscribeRequestParams(uri=NOTES)),
                        types.EmptyResult,
                    )
                assert refused.value.code == types.METHOD_NOT_FOUND
