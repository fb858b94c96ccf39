"""Agents on real MCP servers, through the whole gateway: config, nodes, engine, trace, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from pydantic import JsonValue

from agent import ScriptedAnswer, ScriptedCall, ScriptedModel, ToolMessage
from gateway import TraceEvent
from gateway.assembly import open_gateway
from gateway.cli import main
from gateway.config import Config, parse_config
from tests.servers.real import everything_stdio, time_stdio

pytestmark = [pytest.mark.anyio, pytest.mark.integration]


def config_with_servers(**extra: object) -> Config:
    servers = {
        "everything": everything_stdio().model_dump(exclude_defaults=True),
        "time": time_stdio().model_dump(exclude_defaults=True),
        **extra,
    }
    return parse_config({"mcpServers": servers, "agents": {"assistant": {"tools": list(servers)}}})


def calls(*pairs: tuple[str, dict[str, JsonValue]]) -> ScriptedAnswer:
    return ScriptedAnswer(tool_calls=[ScriptedCall(name=n, arguments=a) for n, a in pairs])


async def test_an_agent_calls_tools_of_two_real_servers_in_one_step() -> None:
    model = ScriptedModel(
        [
            calls(
                ("everything__echo", {"message": "hello"}),
                ("time__get_current_time", {"timezone": "UTC"}),
            ),
            "done",
        ]
    )
    async with open_gateway(config_with_servers()) as gateway:
        with anyio.fail_after(30):
            result = await gateway.run("assistant", "echo and time", model=model)
    assert result.output == "done"
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed[0] == "Echo: hello"
    assert json.loads(observed[1])["timezone"] == "UTC"


async def test_progress_of_a_long_running_tool_reaches_the_trace() -> None:
    model = ScriptedModel(
        [
            calls(("everything__trigger-long-running-operation", {"duration": 0.3, "steps": 3})),
            "finished",
        ]
    )
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with open_gateway(config_with_servers()) as gateway:
        with anyio.fail_after(30):
            await gateway.run("assistant", "go", model=model, hooks=[record])
    tool_start = next(e for e in events if e.kind == "tool" and e.phase == "start")
    progress = [e for e in events if e.phase == "progress"]
    assert [p.output for p in progress] == [
        {"progress": n, "total": 3.0, "message": None} for n in (1.0, 2.0, 3.0)
    ]
    assert all(p.parent_id == tool_start.id for p in progress)


async def test_an_agent_reads_a_servers_resources_capped_as_results_are() -> None:
    everything = everything_stdio(resource_tools=True, max_output=120)
    config = parse_config(
        {
            "mcpServers": {"everything": everything.model_dump(exclude_defaults=True)},
            "agents": {"assistant": {"tools": ["everything"]}},
        }
    )
    document = "demo://resource/static/document/architecture.md"
    model = ScriptedModel(
        [
            calls(
                ("everything__read_resource", {"uri": document}),
                ("everything__read_resource", {"uri": "demo://nope"}),
            ),
            "read",
        ]
    )
    async with open_gateway(config) as gateway:
        with anyio.fail_after(30):
            result = await gateway.run("assistant", "read the architecture", model=model)
    assert result.output == "read"
    offered = {tool.name for tool in model.calls[0][1]}
    assert {"everything__list_resources", "everything__read_resource"} <= offered
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed[0].startswith(f"[resource: {document} (text/markdown)]\n")
    assert "\n... [truncated " in observed[0]  # the server's max_output, as for any result
    assert (
        "could not read 'demo://nope': MCP error -32602: Resource demo://nope not found"
        in (observed[1])
    )


async def test_an_agent_runs_a_tool_that_runs_only_as_a_task() -> None:
    config = parse_config(
        {
            "mcpServers": {"everything": everything_stdio().model_dump(exclude_defaults=True)},
            "agents": {"assistant": {"tools": ["everything"]}},
        }
    )
    model = ScriptedModel(
        [calls(("everything__simulate-research-query", {"topic": "tides"})), "researched"]
    )
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with open_gateway(config) as gateway:
        with anyio.fail_after(30):
            await gateway.run("assistant", "research tides", model=model, hooks=[record])
    (observed,) = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed.startswith("# Research Report: tides\n")
    progress = [e.output for e in events if e.phase == "progress"]
    assert progress[0] == {"progress": 1.0, "total": None, "message": "Gathering sources..."}
    assert progress[-1] == {"progress": 4.0, "total": None, "message": "Generating report..."}


async def test_a_server_that_never_starts_leaves_the_others_serving() -> None:
    broken = {"command": "/nonexistent/mcp-server"}
    model = ScriptedModel(
        [
            calls(("broken__anything", {}), ("time__get_current_time", {"timezone": "UTC"})),
            "partly",
        ]
    )
    events: list[TraceEvent] = []

    async def record(event: TraceEvent) -> None:
        events.append(event)

    async with open_gateway(config_with_servers(broken=broken)) as gateway:
        with anyio.fail_after(30):
            result = await gateway.run("assistant", "go", model=model, hooks=[record])
    assert result.output == "partly"
    health = next(e for e in events if e.phase == "note" and e.name == "broken")
    assert isinstance(health.output, dict)
    assert str(health.output["health"]).startswith("broken: failed since")
    observed = [m.content for m in model.calls[1][0] if isinstance(m, ToolMessage)]
    assert observed[0].startswith(
        "Error: tool 'broken__anything' is not available now: its server is not ready "
        "(broken: failed since"
    )
    refused = next(e for e in events if e.name == "broken__anything" and e.phase == "error")
    assert f"Error: {refused.error}" == observed[0]  # the trace shows what the model was told
    assert '"timezone":"UTC"' in observed[1].replace(" ", "")


def test_cli_reads_a_claude_desktop_config_and_reports_server_health(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    desktop = tmp_path / "claude_desktop_config.json"
    servers = {
        "time": time_stdio().model_dump(exclude_defaults=True),
        "broken": {"command": "/nonexistent/mcp-server"},
    }
    desktop.write_text(json.dumps({"mcpServers": servers, "globalShortcut": "Alt+Space"}))
    assert main(["tools", "--config", str(desktop)]) == 1  # one server is down
    out = capsys.readouterr().out
    assert "time__get_current_time" in out
    assert "server time: ready" in out
    assert "server broken: failed" in out
    assert "No such file or directory" in out
    code = main(["call", "time__convert_time", "--config", str(desktop), "--args",
                 json.dumps({"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"})])  # fmt: skip
    assert code == 0
    assert '"datetime": "' in capsys.readouterr().out
