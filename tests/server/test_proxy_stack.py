"""The whole stack as processes: an MCP client → `agent-gateway serve` (stdio or HTTP) →
server-everything (stdio), in proxy mode. What the server sends reaches the client, resource
updates included."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from toolkits import result_text

from ..servers.real import everything_stdio
from .processes import REPO, SCRIPT, http_server
from .proxying import ClientAnswers, Follower
from .support import ERAS, ProgressLog

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

GATEWAY_ENV = {"PYTHONPATH": str(REPO)}
"""The SDK starts stdio servers with a few safe variables only: run this checkout's code."""


def proxy_config(directory: Path) -> Path:
    everything = everything_stdio()
    args = ", ".join(f'"{arg}"' for arg in everything.args)
    config = directory / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f'[mcpServers.everything]\ncommand = "{everything.command}"\nargs = [{args}]\n'
    )
    return config


@asynccontextmanager
async def gateway(transport: str, directory: Path) -> AsyncGenerator[str | StdioServerParameters]:
    """`agent-gateway serve` in front of server-everything: what a `Client` connects to."""
    config = proxy_config(directory)
    if transport == "stdio":
        yield StdioServerParameters(
            command=str(SCRIPT),
            args=["serve", "--stdio", "--config", str(config)],
            cwd=REPO,
            env=GATEWAY_ENV,
        )
    else:
        async with http_server(config) as served:
            yield served.url


@asynccontextmanager
async def gateway_client(
    transport: str, directory: Path, era: str, answers: ClientAnswers
) -> AsyncGenerator[Client]:
    async with (
        gateway(transport, directory) as target,
        Client(target, mode=era, **answers.callbacks()) as client,
    ):
        yield client


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_client_uses_server_everything_through_a_gateway_process(
    tmp_path: Path, transport: str, era: str
) -> None:
    answers = ClientAnswers()
    progress = ProgressLog()
    with anyio.fail_after(50):
        async with gateway_client(transport, tmp_path, era, answers) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            image = await client.call_tool("everything__get-tiny-image", {})
            long_run = await client.call_tool(
                "everything__trigger-long-running-operation",
                {"duration": 0.3, "steps": 3},
                progress_callback=progress,
            )
            sampled = await client.call_tool(
                "everything__trigger-sampling-request", {"prompt": "six times seven"}
            )
            elicited = await client.call_tool("everything__trigger-elicitation-request", {})
            resources = await client.list_resources()
            first = await client.read_resource(resources.resources[0].uri)
            prompts = await client.list_prompts()
            prompt = await client.get_prompt(prompts.prompts[0].name, {})

    assert {"everything__echo", "everything__trigger-sampling-request"} <= names
    assert any(isinstance(block, types.ImageContent) for block in image.content)
    assert not long_run.is_error
    assert [done for done, _total, _message in progress.updates] == [1, 2, 3]
    assert '"text": "42"' in result_text(sampled)
    assert len(answers.sampled) == 1
    assert "- Name: Ada" in result_text(elicited)
    assert len(resources.resources) >= 7
    assert first.contents
    assert prompt.messages


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_client_hears_server_everythings_resource_updates_through_a_gateway_process(
    tmp_path: Path, transport: str, era: str
) -> None:
    follower = Follower()
    with anyio.fail_after(50):
        async with (
            gateway(transport, tmp_path) as target,
            follower.connected(target, era) as client,
        ):
            resources = client.server_capabilities.resources
            uri = (await client.list_resources()).resources[0].uri
            await follower.follow(uri)
            # Sends an update of every resource its session subscribed to at once (and every
            # 5 s after): the gateway's session subscribed for us.
            toggled = await client.call_tool("everything__toggle-subscriber-updates", {})
            await follower.until(uri)
    assert resources is not None
    assert resources.subscribe
    assert "Started simulated resource updated" in result_text(toggled)
