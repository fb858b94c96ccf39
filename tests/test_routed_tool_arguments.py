"""A toolkit node's call names its tool in the input's `tool` field: a tool's own argument of
that name still reaches it, through the engine and through a run stored and resumed."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from mcp.server import MCPServer
from pydantic import JsonValue

from agent import (
    AgentOptions,
    ScriptedAnswer,
    ScriptedCall,
    ScriptedModel,
    ToolMessage,
)
from gateway import AgentSpec, Gateway, RunState
from toolkits import FunctionToolkit, McpServerConfig, McpToolkit, Toolkit, function_tool

pytestmark = pytest.mark.anyio

ARGUMENTS: dict[str, JsonValue] = {"tool": "grep", "detail": 2}
EXPLAINED = "explaining grep at detail 2"
SERVER_EXPLAINED = '{"result":"explaining grep at detail 2"}'  # its structured content


def explain(tool: str, detail: int = 1) -> str:
    """Explain how to use a command-line tool, by its name."""
    return f"explaining {tool} at detail {detail}"


def other(x: int) -> int:
    """Another tool, so that the local node is a toolkit (routed by tool name)."""
    return x


def help_server() -> MCPServer:
    server = MCPServer("help")
    server.tool()(explain)
    return server


def script() -> list[ScriptedAnswer | str]:
    called = ScriptedCall(name="help__explain", arguments=ARGUMENTS)
    return [ScriptedAnswer(tool_calls=[called]), "done"]


def gateway_on(node: Toolkit, model: ScriptedModel) -> Gateway:
    options = AgentOptions(return_intermediate_steps=True)
    return Gateway([node], [AgentSpec("a", model, tools=["help"], options=options)])


def told(model: ScriptedModel) -> list[str]:
    return [m.content for m in model.calls[-1][0] if isinstance(m, ToolMessage)]


async def test_an_mcp_tools_argument_named_tool_reaches_its_server() -> None:
    config = McpServerConfig(command="in-process")
    with anyio.fail_after(30):
        async with McpToolkit("help", config, target=help_server()) as node:
            model = ScriptedModel(script())
            result = await gateway_on(node, model).run("a", "how do I use grep?")
    assert result.output == "done"
    assert told(model) == [SERVER_EXPLAINED]
    [step] = result.items[0].steps or []
    assert step.tool_input == ARGUMENTS


async def test_a_local_toolkit_tools_argument_named_tool_reaches_it() -> None:
    node = FunctionToolkit("help", [function_tool(explain), function_tool(other)])
    model = ScriptedModel(
        [ScriptedAnswer(tool_calls=[ScriptedCall(name="explain", arguments=ARGUMENTS)]), "done"]
    )
    result = await gateway_on(node, model).run("a", "how do I use grep?")
    assert told(model) == [EXPLAINED]
    [step] = result.items[0].steps or []
    assert step.tool_input == ARGUMENTS


async def test_a_stored_call_keeps_the_argument_and_resumes_in_a_fresh_gateway() -> None:
    """Stopped before its call ran, the run's stored request carries the routed input (the
    tool's name under `tool`) and the model's own `tool` beside it; a fresh gateway resumed
    from the JSON gives the server every argument."""

    class Stop(Exception):
        pass

    stored: list[str] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        if state.request is not None:  # the call is stored: this process goes no further
            raise Stop

    config = McpServerConfig(command="in-process")
    with anyio.fail_after(30):
        async with McpToolkit("help", config, target=help_server()) as node:
            with pytest.raises(Stop):
                await gateway_on(node, ScriptedModel(script())).run(
                    "a", "how do I use grep?", checkpoint=checkpoint
                )
        written: dict[str, Any] = json.loads(stored[-1])["request"]
        [action] = written["actions"]
        assert action["input"] == {"tool": "help__explain", "detail": 2}
        assert action["displaced"] == {"tool": "grep"}
        # Older agents would call the tool without it: they refuse the run by its version.
        assert written["metadata"]["version"] == 3

        state = RunState.model_validate_json(stored[-1])
        async with McpToolkit("help", config, target=help_server()) as node:
            model = ScriptedModel(["done"])  # the first answer was already given
            result = await gateway_on(node, model).resume(state)
    assert result.output == "done"
    assert told(model) == [SERVER_EXPLAINED]


async def test_a_run_stored_before_the_argument_was_kept_aside_still_resumes() -> None:
    """What an earlier version stored: the routed input alone (the model's `tool` lost to the
    tool's name), metadata version 1. It resumes; the tool is called with what was kept."""
    stored: list[str] = []

    class Stop(Exception):
        pass

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump_json())
        if state.request is not None:
            raise Stop

    node = FunctionToolkit("help", [function_tool(explain), function_tool(other)])
    first = ScriptedAnswer(tool_calls=[ScriptedCall(name="explain", arguments=ARGUMENTS)])
    with pytest.raises(Stop):
        await gateway_on(node, ScriptedModel([first])).run("a", "grep?", checkpoint=checkpoint)
    old: dict[str, Any] = json.loads(stored[-1])
    for action in old["request"]["actions"]:
        action.pop("displaced", None)
    old["request"]["metadata"]["version"] = 1

    model = ScriptedModel(["done"])
    result = await gateway_on(node, model).resume(RunState.model_validate(old))
    assert result.output == "done"
    [observed] = told(model)
    assert observed.startswith("Error: invalid arguments for explain: tool: Field required")


async def test_calls_without_an_argument_named_tool_are_stored_as_before() -> None:
    stored: list[dict[str, Any]] = []

    async def checkpoint(state: RunState) -> None:
        stored.append(state.model_dump(mode="json"))

    node = FunctionToolkit("help", [function_tool(explain), function_tool(other)])
    called = ScriptedCall(name="other", arguments={"x": 3})
    model = ScriptedModel([ScriptedAnswer(tool_calls=[called]), "done"])
    await gateway_on(node, model).run("a", "three", checkpoint=checkpoint)
    request = next(s["request"] for s in stored if s["request"] is not None)
    assert request["actions"][0]["input"] == {"x": 3, "tool": "other"}
    assert "displaced" not in request["actions"][0]
    assert request["metadata"]["version"] == 1
    assert told(model) == ["3"]
