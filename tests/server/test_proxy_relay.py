"""Proxy mode: the nodes' list changes reach our clients, debounced, in both eras.

A 2025-11-25 client hears `notifications/*/list_changed`; a 2026-07-28 client hears them on
the `subscriptions/listen` stream it opened (the SDK also hands those to `message_handler`,
so only one of the two is counted).
"""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from gateway import Gateway
from gateway.server.notifications.list_changes import DEBOUNCE
from tests.servers.catalog import CatalogServer
from toolkits.mcp import ProtocolMode

from .proxying import Heard, listening, mcp_nodes
from .support import ERAS, serve

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("era", ERAS)
async def test_a_burst_of_changes_makes_one_notification_per_list(era: str) -> None:
    a, b = CatalogServer("a"), CatalogServer("b")
    heard = Heard()
    async with (
        mcp_nodes(("a", a), ("b", b), protocol="legacy") as nodes,
        Client(
            serve(Gateway(nodes, []), expose_tools=True),
            mode=era,
            message_handler=heard.on_message if era == "legacy" else None,
        ) as client,
        listening(client, heard),
    ):
        with anyio.fail_after(10):
            # Two nodes change their tools, one its prompts and one its resources, at once.
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "a__change", {"lists": ["tools", "prompts"]})
                tg.start_soon(client.call_tool, "b__change", {"lists": ["tools", "resources"]})
            await heard.until()
        # Nothing more comes for that burst (a bounded wait for what must not happen).
        with anyio.move_on_after(3 * DEBOUNCE):
            await heard.more_than(3)
        tools = {tool.name for tool in (await client.list_tools()).tools}
        prompts = {prompt.name for prompt in (await client.list_prompts()).prompts}
        resources = {resource.uri for resource in (await client.list_resources()).resources}
    assert sorted(heard.lists) == ["prompts", "resources", "tools"]
    assert {"a__added_4", "b__added_4"} <= tools
    assert "a__added_0" in prompts
    assert "memo://added/0" in resources


@pytest.mark.parametrize("down", ["legacy", "modern"])
@pytest.mark.parametrize("era", ERAS)
async def test_a_later_change_is_heard_again(era: str, down: ProtocolMode) -> None:
    a = CatalogServer("a")
    heard = Heard()
    async with (
        mcp_nodes(("a", a), protocol=down) as nodes,
        Client(
            serve(Gateway(nodes, []), expose_tools=True),
            mode=era,
            message_handler=heard.on_message if era == "legacy" else None,
        ) as client,
        listening(client, heard),
    ):
        with anyio.fail_after(10):
            await client.call_tool("a__change", {"lists": ["tools"]})
            await heard.until(kinds={"tools"})
            first = heard.lists.count("tools")
            await client.call_tool("a__change", {"lists": ["tools"]})
            await heard.more_than(first, "tools")
        tools = {tool.name for tool in (await client.list_tools()).tools}
    assert {"a__added_4", "a__added_5"} <= tools


@pytest.mark.parametrize("down", ["legacy", "modern"])
async def test_a_listing_kept_while_the_tools_are_the_same_is_not_served_after_they_change(
    down: ProtocolMode,
) -> None:
    """The listing is made once for as long as the nodes list the same tools (the router,
    the served tools and the gateway keep what they made of them): a change is served."""
    a, b = CatalogServer("a"), CatalogServer("b")
    heard = Heard()
    async with mcp_nodes(("a", a), ("b", b), protocol=down) as nodes:
        gateway = Gateway(nodes, [])
        async with (
            Client(serve(gateway, expose_tools=True), message_handler=heard.on_message) as client,
            listening(client, heard),
        ):
            before = {tool.name for tool in (await client.list_tools()).tools}
            kept = await gateway.list_tools()
            assert await gateway.list_tools() is kept  # the same tools: made once
            with anyio.fail_after(10):
                await client.call_tool("b__change", {"lists": ["tools"]})
                await heard.until(kinds={"tools"})
            after = {tool.name for tool in (await client.list_tools()).tools}
            changed = await gateway.list_tools()
    assert "b__added_4" not in before
    assert after == before | {"b__added_4"}
    assert changed is not kept
    assert "b__added_4" in changed
