"""With `[gateway.oauth.scopes]` and a run store: a client that may call an agent may use the
run handle it gets (`get_run`, `approve_run`, `deny_run`) and its MCP tasks, only on its own
runs; a client granted no agent is shown none of them and is refused, naming the scopes that
would allow them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from .test_resource_server import client, gateway_behind_oauth, text

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

SCOPES = {"agents": ["assistant"], "calc": ["calculator"], "admin": ["*"]}
RUN_TOOLS = {"get_run", "approve_run", "deny_run", "cancel_run"}


def _gated(tmp_path: Path) -> dict[str, Any]:
    """The assistant's table: it calls the calculator, which needs a person's approval."""
    script = tmp_path / "gated.json"
    call = {"name": "calculator", "arguments": {"expression": "6 * 7"}}
    script.write_text(json.dumps([{"tool_calls": [call]}, {"content": "It is 42."}]))
    return {"model": f"scripted:{script}", "require_approval": ["calculator"]}


async def _list_tasks(session: Any) -> types.ListTasksResult:
    return await session.session.send_request(types.ListTasksRequest(), types.ListTasksResult)


async def test_a_client_that_may_call_an_agent_uses_its_run_handle_and_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(
        tmp_path, monkeypatch, assistant=_gated(tmp_path), stored=True, scopes=SCOPES
    ) as served:
        alice = served.issuer.token(served.url, scope="mcp agents")
        async with client(served.url, alice) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {"assistant", *RUN_TOOLS}
            handle = await session.call_tool("assistant", {"prompt": "What is 6 * 7?"})
            assert handle.structured_content is not None, handle
            run_id = handle.structured_content["run"]["run_id"]
            seen = await session.call_tool("get_run", {"run_id": run_id})
            assert seen.structured_content is not None, seen
            assert seen.structured_content["status"] == "waiting_approval"
            assert (await _list_tasks(session)).tasks == []  # its run, but started as no task

        # Another subject with the same scopes: let through, but the run is not its own.
        bob = served.issuer.token(served.url, sub="bob", scope="mcp agents")
        async with client(served.url, bob) as session:
            refused = await session.call_tool("approve_run", {"run_id": run_id})
            assert refused.is_error
            assert text(refused) == f"no run {run_id!r} started by this client"
            assert (await _list_tasks(session)).tasks == []

        async with client(served.url, alice) as session:
            approved = await session.call_tool("approve_run", {"run_id": run_id})
            assert text(approved) == "It is 42."


async def test_a_client_granted_no_agent_gets_no_run_tools_nor_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with gateway_behind_oauth(
        tmp_path, monkeypatch, assistant=_gated(tmp_path), stored=True, scopes=SCOPES
    ) as served:
        calc = served.issuer.token(served.url, scope="mcp calc")
        async with client(served.url, calc) as session:
            names = {tool.name for tool in (await session.list_tools()).tools}
            assert names == {"calculator"}
            with pytest.raises(MCPError):  # a 403 it could step up from
                await session.call_tool("get_run", {"run_id": "r1"})
            with pytest.raises(MCPError):
                await _list_tasks(session)
        headers = {
            "Authorization": f"Bearer {calc}",
            "Accept": "application/json, text/event-stream",
        }
        for method, params in (
            ("tools/call", {"name": "approve_run", "arguments": {"run_id": "r1"}}),
            ("tasks/get", {"taskId": "r1"}),
        ):
            body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
            async with httpx2.AsyncClient() as http:
                answer = await http.post(served.url, json=body, headers=headers)
            assert answer.status_code == 403, method
            challenge = answer.headers["www-authenticate"]
            assert 'error="insufficient_scope"' in challenge
            assert 'scope="mcp calc agents"' in challenge  # held, and the narrowest to ask
            assert (
                "needs a scope granting an agent: agents or admin"
                in answer.json()["error_description"]
            )
