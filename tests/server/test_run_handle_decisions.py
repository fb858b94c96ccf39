"""`approve_run` / `deny_run` without `call` decide the waiting calls the client was shown (by
the run handle, `get_run` or a decision's answer), never one that began waiting since: a
sub-agent beside the one whose call the handle named reaches its own gated call later. A
client shown none of the calls waiting is shown them, and nothing is decided."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from pydantic import JsonValue

from agent import ScriptedAnswer, ScriptedCall
from gateway import AgentSpec, Gateway
from gateway.approval import ApprovalRule
from gateway.config import GatewaySettings
from gateway.durable import open_runs
from gateway.server import build_server
from tests.prompt_model import PromptModel
from toolkits import FunctionToolkit, function_tool

pytestmark = pytest.mark.anyio


def _call(tool: str, call_id: str, **arguments: JsonValue) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=tool, id=call_id, arguments=arguments)])


class Side:
    """The tools' side effects, and a hold the later sub-agent waits behind."""

    def __init__(self) -> None:
        self.erased: list[str] = []
        self.release = anyio.Event()

    def gateway(self) -> Gateway:
        async def hold() -> str:
            """Wait for the test."""
            await self.release.wait()
            return "held"

        def erase(text: str) -> str:
            """Erase a text."""
            self.erased.append(text)
            return f"erased {text}"

        model = PromptModel(
            {
                "go": [
                    ScriptedAnswer(
                        tool_calls=[
                            ScriptedCall(name="leaf", id="first", arguments={"prompt": "now"}),
                            ScriptedCall(name="leaf", id="second", arguments={"prompt": "later"}),
                        ]
                    ),
                    "top done",
                ],
                "now": [_call("erase", "e", text="A"), "leaf A"],
                "later": [_call("hold", "h"), _call("erase", "e", text="B"), "leaf B"],
            }
        )
        tools = [function_tool(hold), function_tool(erase)]
        return Gateway(
            [FunctionToolkit("log", tools)],
            [
                AgentSpec("top", model, tools=["leaf"]),
                AgentSpec("leaf", model, tools=["log"], approval=ApprovalRule(["erase"])),
            ],
        )


def _waiting(result: types.CallToolResult) -> list[str]:
    structured = cast(dict[str, Any], result.structured_content)
    report = structured.get("run", structured)
    return [w["call"] for w in report["waiting"]]


async def test_a_decision_without_call_is_for_the_calls_the_client_was_shown(
    tmp_path: Path,
) -> None:
    side = Side()
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        gateway = side.gateway()
        runs.use(gateway)
        server, _router = build_server(gateway, GatewaySettings(), runs=runs)
        async with Client(server) as client:  # can be asked nothing: gets a handle
            handle = await client.call_tool("top", {"prompt": "go"})
            run_id = cast(dict[str, Any], handle.structured_content)["run"]["run_id"]
            first = "first/e"
            assert _waiting(handle) == [first]  # the other sub-agent is still on its way
            side.release.set()
            with anyio.fail_after(20):
                while len(await runs.waiting(run_id)) < 2:
                    await anyio.wait_all_tasks_blocked()
            approved = await client.call_tool("approve_run", {"run_id": run_id})
            assert not approved.is_error, approved.content
            assert _waiting(approved) == ["second/e"]  # not decided: shown now, as its answer
            denied = await client.call_tool("deny_run", {"run_id": run_id})
            assert denied.content == [types.TextContent(text="top done")]
    assert side.erased == ["A"]


async def test_a_client_shown_no_waiting_call_is_shown_them_and_nothing_is_decided(
    tmp_path: Path,
) -> None:
    side = Side()
    side.release.set()
    async with open_runs(f"sqlite:///{tmp_path / 'runs.sqlite'}") as runs:
        gateway = side.gateway()
        runs.use(gateway)
        server, _router = build_server(gateway, GatewaySettings(), runs=runs)
        async with Client(server) as client:
            handle = await client.call_tool("top", {"prompt": "go"})
            run_id = cast(dict[str, Any], handle.structured_content)["run"]["run_id"]
            with anyio.fail_after(20):
                while len(await runs.waiting(run_id)) < 2:
                    await anyio.wait_all_tasks_blocked()
        # A gateway that showed this client nothing (a restart, another replica's handle).
        server, _router = build_server(gateway, GatewaySettings(), runs=runs)
        async with Client(server) as client:
            refused = await client.call_tool("approve_run", {"run_id": run_id})
            assert refused.is_error
            [said] = refused.content
            assert isinstance(said, types.TextContent)
            assert said.text.startswith(f"run {run_id}: nothing was decided, since you were not")
            assert 'first/e: erase {"text": "A"}' in said.text
            assert side.erased == []
            approved = await client.call_tool("approve_run", {"run_id": run_id})
            assert approved.content == [types.TextContent(text="top done")]
    assert sorted(side.erased) == ["A", "B"]
