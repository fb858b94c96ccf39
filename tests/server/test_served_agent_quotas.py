"""One client's calls keep to its share of a node (`[gateway] max_concurrency`) in every
configuration: a served agent's calls in an agent-only gateway, and an exposed local tool's,
wait for each other, not each for a fresh share."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from mcp import Client

from agent import ScriptedModel
from gateway import AgentSpec, Gateway
from toolkits import FunctionToolkit, function_tool

from .support import ERAS, call, serve

pytestmark = pytest.mark.anyio

WHY = "one of this client's 2 running calls on 'hold' to end ([gateway] max_concurrency)"


class Holder:
    """A local tool that counts the calls that entered it and holds each until released."""

    def __init__(self) -> None:
        self.entered = 0
        self.inside = 0
        self.most = 0
        self.released = anyio.Event()

        async def hold() -> str:
            """Hold until released."""
            self.entered += 1
            self.inside += 1
            self.most = max(self.most, self.inside)
            try:
                await self.released.wait()
            finally:
                self.inside -= 1
            return "held"

        self.node = FunctionToolkit("hold", [function_tool(hold)])


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("tool", ["holding", "hold"])
async def test_one_clients_calls_wait_for_its_share_of_a_node(era: str, tool: str) -> None:
    """Four calls at once on one client with `max_concurrency = 2`, of an agent that calls the
    tool (no node exposed), or of the tool exposed: two run, two wait, then they do."""
    holder = Holder()
    # Each run's first turn calls the tool; all four are taken before any call is released.
    model = ScriptedModel([call("hold")] * 4 + ["done"] * 4)
    gateway = Gateway(
        [holder.node],
        [AgentSpec(name="holding", model=model, tools=["hold"])],
        max_concurrency=2,
    )
    limit = gateway.node_limit("hold")
    told: list[str] = []
    answers: list[object] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        del progress, total
        if message is not None and WHY in message:
            told.append(message)

    async def one(client: Client) -> None:
        arguments = {"prompt": "go"} if tool == "holding" else {}
        result = await client.call_tool(tool, arguments, progress_callback=progress)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        answers.append(result.structured_content.get("output", result.structured_content))

    with anyio.fail_after(20):
        exposed = serve(gateway, expose_tools=tool == "hold")
        async with Client(exposed, mode=era) as client, anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one, client)
            # Every call in: in the tool, or queued for a slot of this client's share.
            while holder.entered + sum(share.waiting for share in limit.waiting) < 4:
                await anyio.lowlevel.checkpoint()
            assert holder.entered == 2  # with a fresh share per call all four went in
            holder.released.set()
    assert holder.entered == 4
    assert holder.most == 2
    if tool == "holding":  # an agent's run tells its client why it waits
        assert answers == ["done"] * 4
        assert len(told) == 2
