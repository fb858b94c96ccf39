"""Through the gateway a client sees what it would see connected to the server directly.

The server behind is a real stdio process written the usual way (it asks its client over the
request's back-channel during a call); the gateway runs with its defaults.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from gateway import Gateway
from gateway.server.served.instructions import AGENTS, EXPOSED
from toolkits import result_text
from toolkits.mcp import McpServerConfig, McpToolkit, McpToolkitGroup

from ..servers.catalog import CatalogServer
from ..servers.real import everything_stdio, time_stdio
from .processes import REPO, SCRIPT
from .proxying import ClientAnswers, mcp_nodes
from .support import ERAS, calculator_agent, calculator_gateway, serve

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

ASKING = Path(__file__).parents[1] / "servers" / "asking.py"


@pytest.mark.parametrize("era", ERAS)
async def test_a_tool_that_asks_its_client_works_through_the_gateway(era: str) -> None:
    node = McpToolkit("asking", McpServerConfig(command=sys.executable, args=[str(ASKING)]))
    answers = ClientAnswers()
    with anyio.fail_after(30):
        async with (
            node,
            Client(
                serve(Gateway([node], []), expose_tools=True), mode=era, **answers.callbacks()
            ) as client,
        ):
            result = await client.call_tool("asking__ask", {"question": "six times seven?"})
    assert not result.is_error, result_text(result)
    assert result_text(result) == "model said '42'; user is Ada"
    assert len(answers.sampled) == 1
    assert len(answers.elicited) == 1


async def instructions_of(target: Any, era: str) -> str | None:
    async with Client(target, mode=era) as client:
        return client.instructions


def direct(config: McpServerConfig) -> StdioServerParameters:
    assert config.command is not None
    return StdioServerParameters(command=config.command, args=list(config.args))


@pytest.mark.parametrize("era", ERAS)
async def test_the_servers_instructions_reach_our_client_as_it_wrote_them(era: str) -> None:
    with anyio.fail_after(30):
        wrote = await instructions_of(direct(everything_stdio()), "legacy")
        assert wrote is not None
        assert "get-roots-list" in wrote
        async with McpToolkitGroup({"everything": everything_stdio(prefix="never")}) as group:
            served = serve(Gateway(group.nodes, []), expose_tools=True)
            assert await instructions_of(served, era) == wrote
        async with McpToolkitGroup({"everything": everything_stdio()}) as group:
            served = serve(Gateway(group.nodes, []), expose_tools=True)
            prefixed = await instructions_of(served, era)
    # Its words name its tools as it does: the client is told what they are named here.
    assert prefixed == (
        "(The MCP server 'everything': its tools and prompts are named here "
        f"`everything__NAME`.)\n\n{wrote}"
    )


@pytest.mark.parametrize("era", ERAS)
async def test_a_server_without_instructions_gets_none_where_no_agent_is_served(
    era: str,
) -> None:
    with anyio.fail_after(30):
        assert await instructions_of(direct(time_stdio()), era) is None
        async with McpToolkitGroup({"time": time_stdio()}) as group:
            served = serve(Gateway(group.nodes, []), expose_tools=True)
            assert await instructions_of(served, era) is None


@pytest.mark.parametrize("era", ERAS)
async def test_with_agents_and_several_servers_each_servers_instructions_have_a_section(
    era: str,
) -> None:
    crm, docs, quiet = CatalogServer("crm"), CatalogServer("docs"), CatalogServer("quiet")
    crm.server.instructions = "Search before you create a contact.\n"
    docs.server.instructions = "Documents are read-only."
    prefixes = {"prefix": "auto"}
    nodes = mcp_nodes(("crm", crm), ("docs", docs, prefixes), ("quiet", quiet))
    with anyio.fail_after(10):
        async with nodes as (crm_node, docs_node, quiet_node):
            gateway = calculator_gateway(
                calculator_agent(["-"]), nodes=[crm_node, docs_node, quiet_node]
            )
            said = await instructions_of(serve(gateway, expose_tools=True), era)
    assert said == (
        f"{AGENTS} {EXPOSED}\n\n"
        "## crm\n\n(The MCP server 'crm': its tools and prompts are named here `crm__NAME`.)"
        "\n\nSearch before you create a contact.\n\n"
        "## docs\n\n(The MCP server 'docs': a tool or prompt of it may be named here "
        "`docs__NAME`, when another server offers the same name.)\n\nDocuments are read-only."
    )


@pytest.mark.parametrize("era", ERAS)
async def test_a_real_stdio_front_gives_the_servers_instructions(tmp_path: Path, era: str) -> None:
    """`serve --stdio` (as Claude Desktop starts it) in front of server-everything alone."""
    everything = everything_stdio()
    config = tmp_path / "gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.everything]\ncommand = {json.dumps(everything.command)}\n"
        f'args = {json.dumps(everything.args)}\nprefix = "never"\n'
    )
    front = StdioServerParameters(
        command=str(SCRIPT),
        args=["serve", "--stdio", "--config", str(config)],
        cwd=str(REPO),
        env=dict(os.environ),  # the SDK passes on only a few variables: PYTHONPATH too
    )
    with anyio.fail_after(60):
        wrote = await instructions_of(direct(everything), "legacy")
        assert wrote is not None
        assert await instructions_of(front, era) == wrote
