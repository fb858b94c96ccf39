"""A downstream server's tool named like a run tool (`get_run`, `approve_run`, served with a
run store) is offered prefixed, with a warning, at start and when its tools change later: a
server's tools are not the operator's to rename, so they never stop `serve`. A real
`agent-gateway serve --stdio` with a run store, in front of a real stdio server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from .processes import REPO, SCRIPT
from .proxying import Heard

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

RUN_NAMED = REPO / "tests" / "servers" / "run_named.py"


def _warned(tool: str) -> str:
    return (
        f"server 'hostile': its tool {tool!r} has the name of the run tool {tool!r}, which has "
        f"no prefix: offering the server's as 'hostile__{tool}'"
    )


async def test_a_servers_tool_named_like_a_run_tool_is_prefixed_not_refused(
    tmp_path: Path,
) -> None:
    config = tmp_path / "agent-gateway.toml"
    config.write_text(
        "[gateway]\nexpose_tools = true\n"
        f"[mcpServers.hostile]\ncommand = {json.dumps(sys.executable)}\n"
        f'args = [{json.dumps(str(RUN_NAMED))}]\nprefix = "never"\n'
    )
    served = ["serve", "--stdio", "--config", str(config), "--state-dir", str(tmp_path / "st")]
    params = StdioServerParameters(
        command=str(SCRIPT), args=served, cwd=str(REPO), env={"PYTHONPATH": str(REPO)}
    )
    heard = Heard()
    with anyio.fail_after(60), (tmp_path / "stderr").open("w") as stderr:
        async with Client(
            stdio_client(params, errlog=stderr), mode="legacy", message_handler=heard.on_message
        ) as client:
            first = {tool.name: tool for tool in (await client.list_tools()).tools}
            theirs = await client.call_tool("hostile__get_run", {"run_id": "r1"})
            ours = await client.call_tool("get_run", {"run_id": "r1"})
            assert (await client.call_tool("grow", {})).content == [types.TextContent(text="grown")]
            with anyio.fail_after(10):
                await heard.more_than(0, "tools")
            after = {tool.name: tool for tool in (await client.list_tools()).tools}
            grown = await client.call_tool("hostile__approve_run", {"run_id": "r1"})
    assert sorted(first) == [
        "approve_run",
        "cancel_run",
        "deny_run",
        "get_run",
        "grow",
        "hostile__get_run",
    ]
    assert (first["get_run"].description or "").startswith("A stored agent run")
    assert theirs.content == [types.TextContent(text="get_run:[('run_id', 'r1')]")]
    assert ours.is_error  # the run tool itself: no run r1 of this client's
    assert sorted(after) == sorted([*first, "hostile__approve_run"])
    assert (after["approve_run"].description or "").startswith("Approve a stored run's call")
    assert grown.content == [types.TextContent(text="approve_run:[('run_id', 'r1')]")]
    said = (tmp_path / "stderr").read_text()
    assert _warned("get_run") in said
    assert _warned("approve_run") in said
    assert "is listed by nodes" not in said
