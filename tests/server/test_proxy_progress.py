"""Proxy mode: every progress report of a proxied call reaches the client, in order.

In both client eras: over the request's own stream (2025-11-25), and across input-required
rounds (2026-07-28), where a report that arrives while no round waits goes out with the next.
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.session import ClientRequestContext

from gateway import Gateway
from tests.servers.inprocess import Context, ToyServer, text_result
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit

from .support import ERAS, ProgressLog, serve

pytestmark = pytest.mark.anyio


def steps_node() -> McpToolkit:
    """`toy__steps(steps)`: reports each step and answers at once after the last."""
    toy = ToyServer("toy")
    toy.add_worker("steps", interval=0)
    config = McpServerConfig(command="in-process", protocol="legacy")
    return McpToolkit("toy", config, target=toy.server)


@pytest.mark.parametrize("era", ERAS)
async def test_the_last_progress_report_is_not_overtaken_by_the_result(era: str) -> None:
    node = steps_node()
    async with node, Client(serve(Gateway([node], []), expose_tools=True), mode=era) as client:
        for _ in range(20):
            progress = ProgressLog()
            with anyio.fail_after(10):
                result = await client.call_tool(
                    "toy__steps", {"steps": 3}, progress_callback=progress
                )
            assert result_text(result) == "worked"
            assert [done for done, _total, _message in progress.updates] == [1, 2, 3]


@pytest.mark.parametrize("era", ERAS)
async def test_progress_sent_while_the_client_answers_a_question_reaches_it(era: str) -> None:
    # The server reports step 1, asks the client, and reports steps 2 and 3 while the client
    # is still answering: on 2026-07-28 no round waits then (the question ended the last one).
    asked, reported = anyio.Event(), anyio.Event()

    async def ask_and_work(ctx: Context, _args: dict[str, Any]) -> types.CallToolResult:
        await ctx.session.report_progress(1, 3, "step 1")

        async def work_while_asked() -> None:
            await asked.wait()
            await ctx.session.report_progress(2, 3, "step 2")
            await ctx.session.report_progress(3, 3, "step 3")
            reported.set()

        action = "none"
        async with anyio.create_task_group() as tg:
            tg.start_soon(work_while_asked)
            answer = await ctx.session.elicit_form("Go on?", {"type": "object", "properties": {}})
            action = answer.action
        return text_result(f"answered {action}")

    async def elicit(
        context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult:
        asked.set()
        await reported.wait()
        return types.ElicitResult(action="accept", content={})

    toy = ToyServer("toy")
    toy.add("ask_and_work", ask_and_work)
    node = McpToolkit(
        "toy", McpServerConfig(command="in-process", protocol="legacy"), target=toy.server
    )
    progress = ProgressLog()
    async with (
        node,
        Client(
            serve(Gateway([node], []), expose_tools=True), mode=era, elicitation_callback=elicit
        ) as client,
    ):
        with anyio.fail_after(10):
            result = await client.call_tool("toy__ask_and_work", {}, progress_callback=progress)
    assert result_text(result) == "answered accept"
    assert [done for done, _total, _message in progress.updates] == [1, 2, 3]
